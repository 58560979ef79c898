"""The read layer: every query the APIs answer, batch-first. REST routes, GraphQL resolvers and
their DataLoaders all read through these modules, so each read ("a run's changes", "queue
positions", "a stack's last run", "active runs") is written once. Modules by aggregate: runs,
changes, catalog (folders and stacks), settings (inherited settings and variables); scope holds
the one read session of a request.

The rows handed out are records to read, never to write: the names below are what the API layer
may annotate them (and the sessions it passes back) with, without reaching into the database.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession as Session

from firstlume.db.models import (
    ApiToken,
    PhaseToken,
    Run,
    StateHead,
)
from firstlume.db.models_audit import AuditEntry
from firstlume.services.reads.scope import ReadScope

__all__ = [
    "ApiToken",
    "AuditEntry",
    "PhaseToken",
    "ReadScope",
    "Run",
    "Session",
    "StateHead",
]
