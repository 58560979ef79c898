"""What the served benchmarks share: a fresh migrated database (PostgreSQL or SQLite), a seeded
organization, token and stack, and a control plane served by uvicorn in a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx

from firstlume.crypto import generate_key
from firstlume.db.engine import Database
from firstlume.db.migrate import upgrade
from firstlume.keys import load_keyring
from firstlume.pubsub import PubSub
from firstlume.services import accounts, catalog
from firstlume.services.commands import CreateStack
from firstlume.services.context import Context
from firstlume.settings import Settings

PG_SERVER = os.environ.get("FIRSTLUME_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
KEY = generate_key()


def pg_url(database: str, driver: str = "postgresql+asyncpg") -> str:
    return f"{driver}://" + PG_SERVER.split("://", 1)[1].rsplit("/", 1)[0] + "/" + database


@contextlib.asynccontextmanager
async def database(kind: str) -> AsyncIterator[str]:
    """A migrated database of its own, dropped afterwards; yields its SQLAlchemy URL."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite+aiosqlite:///{tmp}/bench.db"
            await asyncio.to_thread(upgrade, url)
            yield url
        return
    name = f"fl_bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(PG_SERVER)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    try:
        url = pg_url(name)
        await asyncio.to_thread(upgrade, url)
        yield url
    finally:
        admin = await asyncpg.connect(PG_SERVER)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def environment(url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    return {
        "FIRSTLUME_DATABASE_URL": url,
        "FIRSTLUME_DATA_DIR": str(data_dir),
        "FIRSTLUME_ENCRYPTION_KEYS": KEY,
        "FIRSTLUME_SCHEDULER": "off",
        **extra,
    }


@contextlib.asynccontextmanager
async def context(url: str, data_dir: Path) -> AsyncIterator[Context]:
    settings = Settings.from_env(environment(url, data_dir))
    db = Database(url)
    pubsub = PubSub(settings.pubsub_url)
    await pubsub.connect()
    try:
        yield Context(settings=settings, db=db, keyring=load_keyring(settings), pubsub=pubsub)
    finally:
        await pubsub.disconnect()
        await db.dispose()


@dataclass
class Tenant:
    org: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


async def seed(ctx: Context, stacks: tuple[str, ...] = ("net",)) -> Tenant:
    async with ctx.unit() as unit:
        org = await accounts.create_org(unit.session, "bench")
        token = await accounts.create_token(unit.session, "bench", "bench@example.com")
        for slug in stacks:
            await catalog.create_stack(
                unit.session, ctx.keyring, org, CreateStack(slug=slug, repository="file:///repo")
            )
    return Tenant("bench", token)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    url: str
    pid: int

    def cpu_seconds(self) -> float:
        """User and system time the server process has used so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def served(env: dict[str, str], command: list[str] | None = None) -> Iterator[Server]:
    """The control plane (or `command`, given the port last) in a subprocess."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = command or [sys.executable, "-m", "firstlume", "serve", "--log-level", "warning", "--port"]
    process = subprocess.Popen(
        [*argv, str(port)], env={**os.environ, **env, "FIRSTLUME_PUBLIC_URL": url}, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "the control plane did not start: " + (process.stderr.read() or b"").decode()
                )
            time.sleep(0.1)
        yield Server(url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def describe(values_ms: list[float]) -> str:
    return (
        f"p50 {statistics.median(values_ms):7.1f} ms  p99 {percentile(values_ms, 0.99):7.1f} ms"
        f"  max {max(values_ms):7.1f} ms"
    )
