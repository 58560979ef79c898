"""The migrations build exactly the schema the models describe, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from firstlume.db.migrate import current_revision, head_revision
from firstlume.db.models import Base
from firstlume.services.context import Context


async def test_migrated_database_matches_the_models(ctx: Context) -> None:
    async with ctx.db.engine.connect() as connection:
        diff = await connection.run_sync(
            lambda sync: compare_metadata(MigrationContext.configure(sync), Base.metadata)
        )
    assert diff == []
    assert await current_revision(ctx.db.engine) == head_revision()
