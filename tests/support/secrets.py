"""What an attacker with the database's disk would read, for the secret scans."""

from __future__ import annotations

import subprocess
from pathlib import Path


def database_bytes(database_url: str) -> bytes:
    """Every byte the database holds for its tables, as an attacker with the disk would see it."""
    if database_url.startswith("sqlite"):
        path = Path(database_url.split(":///", 1)[1])
        # Recent writes may still sit in the write-ahead log: read it too.
        wal = path.with_name(path.name + "-wal")
        return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    name = database_url.rsplit("/", 1)[1]
    dump = subprocess.run(
        ["pg_dump", "-h", "127.0.0.1", "-U", "postgres", "--data-only", name], capture_output=True, check=True
    )
    return dump.stdout
