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
from support import in_process
from support.error_codes import acheck_error_codes
from support.forked import FORKS, ForkedProcess
from support.statements import StatementCounter
from support.terraform import install_cli_config
from support.waiting import wait_until

# The browser tests' fixtures module, imported by several test modules and declared as a plugin by
# others: rewritten wherever it is first imported (else the later plugin declaration is an error).
pytest.register_assert_rewrite("support.browser")

PG_SERVER = os.environ.get("FIRSTLUME_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
# The Redis server of the Redis pub/sub backend's tests (tests/test_pubsub_redis.py).
REDIS_SERVER = os.environ.get("FIRSTLUME_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
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


# The end-to-end tests live in tests/e2e/: whatever runs another process (a served control plane,
# `make run`, executors, the real terraform, the browser, the CLI as a process). The marker
# follows the folder, so `pytest -m "not e2e"` (`make test-fast`) is the in-process inner loop.
E2E_DIR = Path(__file__).resolve().parent / "e2e"


# The tests that take longest, started first, so that no worker is still running one when the
# others have run out of tests (xdist hands out tests in collection order).
LONGEST_FIRST = ("test_execution_volume.py", "test_malformed_input.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_DIR in Path(item.path).parents:
            item.add_marker(pytest.mark.e2e)
    # The end-to-end tests next: they mostly wait (on servers, executors, terraform, the browser),
    # and the in-process tests fill the cores around them.
    items.sort(
        key=lambda item: (
            Path(item.path).name not in LONGEST_FIRST,
            E2E_DIR not in Path(item.path).parents,
        )
    )


def pytest_configure(config: pytest.Config) -> None:
    in_process.listen()
    # Every terraform the session starts, directly or through an executor's environment: the
    # shared plugin cache (an executor still sets its own), no checkpoint calls.
    os.environ["TF_CLI_CONFIG_FILE"] = str(install_cli_config())
    os.environ["CHECKPOINT_DISABLE"] = "1"


@pytest.fixture(autouse=True)
def in_process_only(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test outside tests/e2e/ starts no process (its fixtures included)."""
    if E2E_DIR in Path(request.node.path).parents:
        yield
        return
    before = len(in_process.started)
    yield
    if len(in_process.started) > before:
        pytest.fail(
            f"this test started another process ({in_process.started[before]}): "
            "a test that does belongs in tests/e2e/ (see conftest.py)"
        )


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """This process's migrated template (one per xdist worker: no two workers share a template)."""
    name = f"fl_tmpl_{RUN_TAG}"
    try:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"'))
    except OSError as error:
        pytest.fail(f"PostgreSQL is not reachable at {PG_SERVER}: {error}. Start it (see README) and rerun.")
    upgrade(_sqlalchemy_pg_url(name))
    yield name
    asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


class PgDatabases:
    """This process's PostgreSQL test databases: each cloned from the migrated template once,
    then handed to the next test emptied (every row deleted, every sequence restarted) instead
    of dropped. DROP DATABASE makes PostgreSQL checkpoint the whole shared cluster (0.1-1.7 s
    here, most of a PostgreSQL test's time); the DELETEs take a few milliseconds (TRUNCATE makes
    new files for every table and index: 0.1-0.5 s). A database whose schema or migration
    version a test changed is dropped after all, so no test sees another's leftovers."""

    # What a reset must leave as the template has it: the relations, functions and triggers of
    # the public schema, and the migration version.
    SHAPE = """
        SELECT coalesce(string_agg(c.relname || ':' || c.relkind::text || ':' || c.relnatts, ',' ORDER BY c.relname), '')
            || '|' || (SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace)
            || '|' || (SELECT count(*) FROM pg_trigger t JOIN pg_class r ON r.oid = t.tgrelid
                       WHERE r.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal)
            || '|' || (SELECT string_agg(version_num, ',') FROM alembic_version)
        FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace
    """

    def __init__(self, template: str) -> None:
        self.template = template
        self.free: list[str] = []
        self.shape, self.reset = asyncio.run(self._read_template())

    async def _read_template(self) -> tuple[str, str]:
        conn = await asyncpg.connect(_asyncpg_url(self.template))
        try:
            shape = await conn.fetchval(self.SHAPE)
            tables = [
                row["relname"]
                for row in await conn.fetch(
                    "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
                    "AND relkind IN ('r', 'p') AND relname <> 'alembic_version' ORDER BY relname"
                )
            ]
            sequences = [
                row["relname"]
                for row in await conn.fetch(
                    "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'S'"
                )
            ]
        finally:
            await conn.close()
        # As the replication role, foreign keys and triggers do not fire: any order will do.
        reset = "SET session_replication_role = replica;"
        reset += "".join(f'DELETE FROM "{t}";' for t in tables)
        reset += "".join(f'ALTER SEQUENCE "{s}" RESTART;' for s in sequences)
        return shape, reset

    def take(self) -> str:
        if self.free:
            return self.free.pop()
        name = f"fl_{RUN_TAG}_{uuid.uuid4().hex[:10]}"
        asyncio.run(_pg_admin(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"'))
        return name

    def give_back(self, name: str) -> None:
        try:
            reusable = asyncio.run(self._emptied(name))
        except (OSError, asyncpg.PostgresError):  # e.g. a test that dropped or renamed it
            reusable = False
        if reusable:
            self.free.append(name)
        else:
            asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    async def _emptied(self, name: str) -> bool:
        # A served control plane or an engine the test leaked may still hold connections.
        await _pg_admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        )
        conn = await asyncpg.connect(_asyncpg_url(name))
        try:
            if await conn.fetchval(self.SHAPE) != self.shape:
                return False
            await conn.execute(self.reset)
            return True
        except asyncpg.InsufficientPrivilegeError:  # not a superuser: a new database each time
            return False
        finally:
            await conn.close()

    def close(self) -> None:
        for name in self.free:
            asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def pg_databases(pg_template: str) -> Iterator[PgDatabases]:
    databases = PgDatabases(pg_template)
    yield databases
    databases.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        path = tmp_path / "firstlume.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    databases: PgDatabases = request.getfixturevalue("pg_databases")
    name = databases.take()
    yield _sqlalchemy_pg_url(name)
    databases.give_back(name)


def settings_env(database_url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        "FIRSTLUME_DATABASE_URL": database_url,
        "FIRSTLUME_DATA_DIR": str(data_dir),
        "FIRSTLUME_ENCRYPTION_KEYS": TEST_KEY,
        "FIRSTLUME_SCHEDULER_INTERVAL": "0.2",
        "FIRSTLUME_EXECUTOR_HEARTBEAT_INTERVAL": "1",
        # One spare, not three: a test's runs take one at a time, and each spare is a Python
        # process started (about 0.4 s of CPU) by each of the suite's served control planes.
        # tests/e2e/test_local_spares.py holds the default's behaviour.
        "FIRSTLUME_EXECUTOR_SPARES": "1",
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
    process: ForkedProcess
    log_path: Path
    env: dict[str, str]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_live_server(
    env: dict[str, str], log_path: Path, timeout: float = 60.0, *, port: int | None = None
) -> LiveServer:
    """A served control plane; on `port` when given (a restarted one must be where its executors
    call), its log appended to `log_path` (a restart's log follows the first one's)."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, **env, "FIRSTLUME_PUBLIC_URL": url}
    # Forked from a process that has imported the server (support/forked.py): `firstlume serve`
    # in a process of its own, without 2 s of imports each time.
    process = FORKS.spawn(["serve", "--port", str(port), "--log-level", "warning"], env, log_path)
    server = LiveServer(url=url, process=process, log_path=log_path, env=env)
    try:
        wait_until(lambda: _ready(url) or process.poll() is not None, timeout, "the control plane to start")
    except BaseException:  # not started in time: it must not outlive the test
        stop_live_server(server)
        raise
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
