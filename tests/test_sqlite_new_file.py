"""A new SQLite file opened by several engines at once (the server's: requests, the relay, the
notifier) is switched to WAL by one of them; the others, refused at once by
SQLite with "database is locked", try again (db/engine.py `_use_wal`) instead of failing their
first statement."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import text

from firstlume.db.engine import Database

ENGINES = 8
FILES = 40


async def test_engines_opening_a_new_file_at_once_all_connect_in_wal_mode(tmp_path: Path) -> None:
    for n in range(FILES):
        url = f"sqlite+aiosqlite:///{tmp_path / f'new-{n}.db'}"
        databases = [Database(url) for _ in range(ENGINES)]

        async def mode(db: Database) -> str:
            async with db.read() as session:
                return str(await session.scalar(text("PRAGMA journal_mode")))

        try:
            modes = await asyncio.gather(*(mode(db) for db in databases), return_exceptions=True)
        finally:
            for db in databases:
                await db.dispose()
        assert modes == ["wal"] * ENGINES, modes
