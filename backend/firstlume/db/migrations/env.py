"""Alembic environment: runs migrations over the async engine on SQLite and PostgreSQL alike."""

from __future__ import annotations

import asyncio

from alembic import context
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
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("Offline migrations are not supported; run `firstlume migrate`.")
asyncio.run(_run_async())
