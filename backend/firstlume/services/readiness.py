"""Whether this process can serve: the database answers, is at the code's migration, and can
store something now."""

from __future__ import annotations

from sqlalchemy import insert, update

from firstlume.db.engine import Database
from firstlume.db.migrate import current_revision, head_revision
from firstlume.db.models import StorageProbe
from firstlume.db.types import utcnow

PROBE_ROW = 1


async def database_revision(db: Database) -> str | None:
    """The database's migration; raises when the database does not answer."""
    return await current_revision(db.engine)


def code_revision() -> str | None:
    return head_revision()


async def probe_storage(db: Database) -> None:
    """Writes the probe row in place; raises what a write raises now (a full disk, a database
    that only reads: services/storage.py tells those apart)."""
    async with db.transaction() as session:
        written = await session.execute(
            update(StorageProbe).where(StorageProbe.id == PROBE_ROW).values(probed_at=utcnow())
        )
        if getattr(written, "rowcount", 1) == 0:  # somebody deleted it
            await session.execute(insert(StorageProbe).values(id=PROBE_ROW, probed_at=utcnow()))
