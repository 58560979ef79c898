"""Whether this process can serve: the database answers and is at the code's migration."""

from __future__ import annotations

from firstlume.db.engine import Database
from firstlume.db.migrate import current_revision, head_revision


async def database_revision(db: Database) -> str | None:
    """The database's migration; raises when the database does not answer."""
    return await current_revision(db.engine)


def code_revision() -> str | None:
    return head_revision()
