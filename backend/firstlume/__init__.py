"""Firstlume: Terraform automation whose apply is always exactly the reviewed plan."""

__version__ = "0.1.0"
