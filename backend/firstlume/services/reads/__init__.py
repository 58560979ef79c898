"""The read layer: every query the APIs answer, batch-first. REST routes, GraphQL resolvers and
their DataLoaders all read through these modules, so each read ("a run's changes", "queue
positions", "a stack's last run", "active runs") is written once. Modules by aggregate: runs,
changes, catalog (organizations, folders and stacks), settings (inherited settings and
variables), state, audit, drift, git, notifications; scope holds the one read session of a
request.

What they hand out are read models: frozen dataclasses named after what the APIs show (RunRecord,
StackRecord, ...), filled from the columns they name, never ORM rows. `Session` is what the API
layer annotates the read sessions it passes back with, without reaching into the database.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession as Session

from firstlume.services.reads.scope import ReadScope

__all__ = ["ReadScope", "Session"]
