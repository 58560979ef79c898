"""Fixtures: real databases (SQLite and PostgreSQL), the app in process and served by uvicorn.

Database-backed tests take the `database_url` fixture, which is parametrized over both
dialects. PostgreSQL must be reachable (FIRSTLUME_TEST_PG_URL, default the local server with
trust auth); each test gets a fresh database cloned from a migrated template.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from starlette.applications import Starlette

from firstlume.app import create_app
from firstlume.db.engine import Database
from firstlume.db.migrate import upgrade
from firstlume.keys import load_keyring
from firstlume.pubsub import PubSub
from firstlume.services import accounts, catalog
from firstlume.services.commands import CreateStack
from firstlume.services.context import Context
from firstlume.services.outbox import OutboxRelay
from firstlume.settings import Settings
from support.error_codes import acheck_error_codes
from support.statements import StatementCounter

PG_SERVER = os.environ.get("FIRSTLUME_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
TEST_KEY = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="  # 32 bytes, tests only
RUN_TAG = uuid.uuid4().hex[:8]


def _asyncpg_url(database: str) -> str:
    return PG_SERVER.rsplit("/", 1)[0] + "/" + database


def _sqlalchemy_pg_url(database: str) -> str:
    return "postgresql+asyncpg://" + _asyncpg_url(database).split("://", 1)[1]


async def _pg_admin(*statements: str) -> None:
    conn = await asyncpg.connect(PG_SERVER)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


# Fixtures that make a test end-to-end: a served control plane (and the browser on it) or the
# real terraform binary. Such tests get the `e2e` marker, so `pytest -m "not e2e"` is a fast loop.
E2E_FIXTURES = frozenset({"server", "api", "ui", "terraform_binary"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    name = f"fl_tmpl_{RUN_TAG}"
    try:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"'))
    except OSError as error:
        pytest.fail(f"PostgreSQL is not reachable at {PG_SERVER}: {error}. Start it (see README) and rerun.")
    upgrade(_sqlalchemy_pg_url(name))
    yield name
    asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        path = tmp_path / "firstlume.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    template = request.getfixturevalue("pg_template")
    name = f"fl_{RUN_TAG}_{uuid.uuid4().hex[:10]}"
    asyncio.run(_pg_admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    yield _sqlalchemy_pg_url(name)
    asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def settings_env(database_url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        "FIRSTLUME_DATABASE_URL": database_url,
        "FIRSTLUME_DATA_DIR": str(data_dir),
        "FIRSTLUME_ENCRYPTION_KEYS": TEST_KEY,
        "FIRSTLUME_SCHEDULER_INTERVAL": "0.2",
        "FIRSTLUME_EXECUTOR_HEARTBEAT_INTERVAL": "1",
    }
    env.update(extra)
    return env


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings.from_env(settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off"))


@pytest.fixture
async def ctx(settings: Settings) -> AsyncIterator[Context]:
    db = Database(settings.database_url)
    pubsub = PubSub("memory://")
    await pubsub.connect()
    yield Context(settings=settings, db=db, keyring=load_keyring(settings), pubsub=pubsub)
    await pubsub.disconnect()
    await db.dispose()


@pytest.fixture
async def relay(ctx: Context) -> AsyncIterator[OutboxRelay]:
    """The outbox relay of a served app, for in-process tests whose listeners (the scheduler, a
    live view) must hear status changes as they would in production."""
    ctx.relay = OutboxRelay(ctx.db, ctx.pubsub, interval=0.05)
    await ctx.relay.start()
    yield ctx.relay
    await ctx.relay.stop()
    ctx.relay = None


@dataclass
class Tenant:
    org: str
    token: str
    email: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


async def make_tenant(ctx: Context, org: str, email: str) -> Tenant:
    async with ctx.unit() as unit:
        await accounts.create_org(unit.session, org)
        token = await accounts.create_token(unit.session, org, email)
    return Tenant(org=org, token=token, email=email)


async def make_stack(ctx: Context, tenant: Tenant, body: dict[str, Any]) -> None:
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        await catalog.create_stack(unit.session, ctx.keyring, org, CreateStack.model_validate(body))


@pytest.fixture
async def tenant(ctx: Context) -> Tenant:
    return await make_tenant(ctx, "acme", "ada@example.com")


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[Starlette]:
    """The app in process (no scheduler), its lifespan running."""
    served: Starlette = create_app(settings)
    async with served.router.lifespan_context(served):
        yield served


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """`app` over httpx's ASGI transport."""
    transport = httpx.ASGITransport(app=app)
    # Every error code a test meets must be in docs/rest-api.md's table.
    hooks = {"response": [acheck_error_codes]}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://testserver", event_hooks=hooks
    ) as http:
        yield http


@pytest.fixture
def app_statements(app: Starlette) -> Iterator[StatementCounter]:
    """The statements `app` runs on its engine."""
    counter = StatementCounter(app.state.ctx.db)
    yield counter
    counter.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    env: dict[str, str]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_live_server(env: dict[str, str], log_path: Path, timeout: float = 30.0) -> LiveServer:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, **env, "FIRSTLUME_PUBLIC_URL": url}
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "firstlume", "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    server = LiveServer(url=url, process=process, log_path=log_path, env=env)
    wait_until(lambda: _ready(url) or process.poll() is not None, timeout, "the control plane to start")
    if process.poll() is not None:
        raise RuntimeError("the control plane exited:\n" + server.log())
    return server


def stop_live_server(server: LiveServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait_until(condition: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    """Polls `condition` until it returns a truthy value; fails the test after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def terraform_binary() -> str:
    path = shutil.which("terraform")
    if path is None:
        pytest.fail("The real `terraform` binary must be on PATH for this test (see README: Testing).")
    return path


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    """The control plane served by uvicorn with its scheduler and local executors, on the test's
    database. A test module may override it to change settings."""
    served = start_live_server(settings_env(database_url, tmp_path / "data"), tmp_path / "server.log")
    yield served
    stop_live_server(served)


@pytest.fixture
def api(server: LiveServer, tenant: Tenant) -> Iterator[Any]:
    """The REST routes of `server`, as the tenant."""
    from support.e2e import Api

    client = Api(server.url, tenant.org, tenant.token)
    yield client
    client.close()
