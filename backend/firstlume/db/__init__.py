"""Persistence: engine and dialect differences, ORM models, migrations."""
