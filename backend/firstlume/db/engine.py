"""The async engine and its dialect differences, kept in one place.

SQLite: one writer at a time. Each transaction starts with BEGIN IMMEDIATE so it takes the
write lock up front; a deferred transaction that reads and then writes can fail with "database
is locked" when another writer got in between, where IMMEDIATE simply waits (busy_timeout).
WAL lets readers proceed meanwhile, so read-only transactions (`Database.read`) begin deferred and
never queue behind writers. PostgreSQL: READ COMMITTED with explicit row locks
(FOR UPDATE [SKIP LOCKED]) where races matter.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.util import await_

from firstlume import retry
from firstlume.domain import json_output, json_stored

# Marks a connection whose transaction only reads (see Database.read).
READ_ONLY = "firstlume_read_only"

# PostgreSQL connections kept open per process, by default (the server's are set by
# FIRSTLUME_DATABASE_POOL_SIZE and FIRSTLUME_DATABASE_MAX_OVERFLOW). Overflow connections are
# closed as soon as they are returned, so a pool too small for the usual burst (a page's
# DataLoader batches, a log line fanned out, a scheduler pass) opens and closes a server session
# per burst; a pool that covers the burst reuses them. Overflow stays as headroom for rare peaks.
POOL_SIZE = 20
MAX_OVERFLOW = 20
# Seconds a request waits for a pooled connection when all are taken before it is answered 503
# storage_unavailable (services/storage.py), rather than SQLAlchemy's 30; the server's is
# FIRSTLUME_DATABASE_POOL_TIMEOUT.
POOL_TIMEOUT_SECONDS = 10
# Connections are renewed after half an hour so that idle ones are not cut by firewalls in between.
POOL_RECYCLE_SECONDS = 1800


def _prepare_sqlite_file(url: str) -> None:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def _use_wal(cursor: Any) -> None:
    """Puts the database file in WAL mode (it stays so). The first connections to a new file (the
    server's engines start at once) may all try to switch it: SQLite refuses all but one at once
    with "database is locked", without waiting for the busy timeout, so a refused one tries
    again shortly (retry.SQLITE_WAL_SWITCH), on the event loop's time."""
    for attempt in retry.SQLITE_WAL_SWITCH.retrying_sync(_locked, sleep=_sleep_on_the_loop):
        with attempt:
            cursor.execute("PRAGMA journal_mode=WAL")


def _locked(error: BaseException) -> bool:
    return "database is locked" in str(error)


def _sleep_on_the_loop(seconds: float) -> None:
    """Sleeps without blocking the event loop, from a connect hook (run in SQLAlchemy's greenlet)."""
    await_(asyncio.sleep(seconds))


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    # JSON columns (a plan's changes: 60,000 attributes) written and read by orjson, with
    # `json` where orjson would read a value differently (domain/json_stored.py).
    kwargs.setdefault("json_serializer", json_output.dumps_text)
    kwargs.setdefault("json_deserializer", json_stored.loads)
    if url.startswith("sqlite"):
        _prepare_sqlite_file(url)
        engine = create_async_engine(url, connect_args={"timeout": 30}, **kwargs)

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            # Let SQLAlchemy, not pysqlite, decide when transactions begin.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA busy_timeout=30000")
            _use_wal(cursor)
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(connection: Any) -> None:
            read_only = connection.get_execution_options().get(READ_ONLY, False)
            connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

        return engine
    kwargs.setdefault("pool_size", POOL_SIZE)
    kwargs.setdefault("max_overflow", MAX_OVERFLOW)
    kwargs.setdefault("pool_recycle", POOL_RECYCLE_SECONDS)
    kwargs.setdefault("pool_timeout", POOL_TIMEOUT_SECONDS)
    engine = create_async_engine(url, **kwargs)

    @event.listens_for(engine.sync_engine, "checkout")
    def _ping(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        # A connection the server has ended (a restart, pg_terminate_backend) is never handed
        # out: the pool connects anew, so a database blip costs no request a 500. asyncpg
        # notices most closed sockets by itself; the rest are found with `SELECT 1` in the simple
        # query protocol, one round trip (SQLAlchemy's own pre-ping wraps it in
        # BEGIN and ROLLBACK: three).
        connection = dbapi_connection.driver_connection
        if connection.is_closed():
            raise DisconnectionError()
        try:
            await_(connection.execute("SELECT 1"))
        except Exception as error:
            raise DisconnectionError() from error

    @event.listens_for(engine.sync_engine, "handle_error")
    def _drop_read_only(context: Any) -> None:
        # A session takes default_transaction_read_only (and a standby's read-only state) when it
        # connects: once one has refused a write as read-only, the pool's connections of that time
        # are replaced, so that the first writes after an operator (or a failover) makes the
        # database writable again are not refused by sessions that still only read.
        if _read_only_refusal(context.original_exception):
            context.is_disconnect = True

    return engine


READ_ONLY_TRANSACTION = "25006"  # SQLSTATE read_only_sql_transaction


def _read_only_refusal(error: BaseException | None) -> bool:
    seen = 0
    while error is not None and seen < 5:
        if getattr(error, "sqlstate", None) == READ_ONLY_TRANSACTION:
            return True
        error = error.__cause__
        seen += 1
    return False


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

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """A session that only reads. On SQLite its transaction begins deferred, so it waits for
        no writer and holds no write lock however long it lasts. On PostgreSQL it reads without
        BEGIN and ROLLBACK: under READ COMMITTED each statement sees the latest commits anyway,
        so a transaction would add two round trips and no consistency."""
        options: dict[str, Any] = {READ_ONLY: True}
        if not self.is_sqlite:
            options["isolation_level"] = "AUTOCOMMIT"
        async with self.sessions() as session:
            await session.connection(execution_options=options)
            yield session

    async def dispose(self) -> None:
        await self.engine.dispose()
