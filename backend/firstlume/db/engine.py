"""The async engine and its dialect differences, kept in one place.

SQLite: one writer at a time. Each transaction starts with BEGIN IMMEDIATE so it takes the
write lock up front; a deferred transaction that reads and then writes can fail with "database
is locked" when another writer got in between, where IMMEDIATE simply waits (busy_timeout).
WAL lets readers proceed meanwhile. PostgreSQL: READ COMMITTED with explicit row locks
(FOR UPDATE [SKIP LOCKED]) where races matter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine


def _prepare_sqlite_file(url: str) -> None:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    if url.startswith("sqlite"):
        _prepare_sqlite_file(url)
        engine = create_async_engine(url, connect_args={"timeout": 30}, **kwargs)

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            # Let SQLAlchemy, not pysqlite, decide when transactions begin.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    kwargs.setdefault("pool_pre_ping", True)
    return create_async_engine(url, **kwargs)


class Database:
    def __init__(self, url: str, **engine_kwargs: Any) -> None:
        self.url = url
        self.engine = create_engine(url, **engine_kwargs)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """One unit of work: commits on success, rolls back on any exception."""
        async with self.sessions() as session, session.begin():
            yield session

    async def dispose(self) -> None:
        await self.engine.dispose()
