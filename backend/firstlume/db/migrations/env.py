"""Alembic environment: runs migrations over the async engine on SQLite and PostgreSQL alike."""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context
from sqlalchemy import event
from sqlalchemy.engine import Connection

from firstlume.db.engine import create_engine
from firstlume.db.models import Base

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_engine(context.config.get_main_option("sqlalchemy.url") or "")
    if engine.dialect.name == "sqlite":
        # Batch mode changes a SQLite table by copying it into a new one and dropping the old:
        # with foreign keys enforced, that DROP would delete every row that references it
        # (ON DELETE CASCADE), such as an organization's memberships when a migration adds or
        # drops one of its columns. Alembic's documentation says to turn them off while migrating.
        @event.listens_for(engine.sync_engine, "connect")
        def _foreign_keys_off(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=OFF")
            cursor.close()

    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("Offline migrations are not supported; run `firstlume migrate`.")
asyncio.run(_run_async())
