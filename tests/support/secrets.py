"""What an attacker with the database's disk would read, for the secret scans."""

from __future__ import annotations

import asyncio
import io
import threading
from pathlib import Path

import asyncpg


def database_bytes(database_url: str) -> bytes:
    """Every byte the database holds for its tables, as an attacker with the disk would see it."""
    if database_url.startswith("sqlite"):
        path = Path(database_url.split(":///", 1)[1])
        # Recent writes may still sit in the write-ahead log: read it too.
        wal = path.with_name(path.name + "-wal")
        return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    # What `pg_dump --data-only` writes (every table's rows, copied out), read in process.
    found: list[bytes] = []
    reader = threading.Thread(  # its own event loop: callers may be inside one
        target=lambda: found.append(
            asyncio.run(_copied_out("postgresql://" + database_url.split("://", 1)[1]))
        )
    )
    reader.start()
    reader.join()
    return found[0]


async def _copied_out(url: str) -> bytes:
    conn = await asyncpg.connect(url)
    try:
        tables = await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
        out = io.BytesIO()
        for table in tables:
            await conn.copy_from_table(table["tablename"], output=out)
        return out.getvalue()
    finally:
        await conn.close()
