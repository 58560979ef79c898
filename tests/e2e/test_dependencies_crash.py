"""A dependency trigger survives the death of its control plane and starts each dependent run
once (adoption-api.md, section 9): the control plane is SIGKILLed while it carries out the
trigger of an upstream apply that has committed (the trigger claimed, the dependent's run not
yet written), and after a restart the dependent has exactly one run for that apply; with two
control planes on one PostgreSQL database, still one.

PostgreSQL only: the test pins the crash inside that window by holding the dependent stack's row
lock (which a run's start needs) from a connection of its own, so the control plane is caught
exactly there. SQLite has one writer for the whole database, so such a lock would stop the
upstream's apply itself."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from conftest import LiveServer, Tenant, free_port, settings_env, start_live_server, stop_live_server
from support.e2e import Api, StackRepo
from support.git_repos import make_repo
from support.terraform import requires_terraform
from support.waiting import until, wait_until

pytestmark = requires_terraform

NETWORK = """
variable "cidr" {
  type    = string
  default = "10.0.0.0/16"
}
resource "terraform_data" "vpc" { input = var.cidr }
output "vpc_id" { value = "vpc-${terraform_data.vpc.output}" }
"""

CLUSTER = """
variable "vpc_id" { type = string }
resource "terraform_data" "cluster" { input = var.vpc_id }
"""


def kill(server: LiveServer) -> None:
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()


def repo(tmp_path: Path, name: str, code: str) -> StackRepo:
    url, _ = make_repo(tmp_path / name, {"infra/main.tf": code})
    return StackRepo(path=tmp_path / name, url=url, state_path=tmp_path / f"{name}-no-state")


def cluster_runs(api: Api, upstream_run: str) -> list[dict[str, Any]]:
    runs = api.http.get(f"{api.o}/stacks/cluster/runs").json()["runs"]
    return [r for r in runs if r["trigger"].get("upstream_run") == upstream_run]


async def connect(database_url: str) -> asyncpg.Connection:
    if not database_url.startswith("postgresql"):
        pytest.skip("pins the crash with a row lock of PostgreSQL (see the module's docstring)")
    return await asyncpg.connect("postgresql://" + database_url.split("://", 1)[1])


@pytest.fixture
async def pg(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """The test's own connection, which holds the lock."""
    connection = await connect(database_url)
    yield connection
    await connection.close()


@pytest.fixture
async def watcher(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A second one, which watches who waits for it."""
    connection = await connect(database_url)
    yield connection
    await connection.close()


async def hold_stack_lock(pg: asyncpg.Connection, org: str, stack: str) -> asyncpg.transaction.Transaction:
    """Locks the stack's row, as a run's start would, until the transaction is rolled back."""
    transaction = pg.transaction()
    await transaction.start()
    await pg.execute(
        "SELECT s.id FROM stacks s JOIN organizations o ON o.id = s.org_id "
        "WHERE o.slug = $1 AND s.slug = $2 FOR UPDATE OF s",
        org,
        stack,
    )
    return transaction


async def blocked_on_a_lock(pg: asyncpg.Connection) -> bool:
    """Whether a session of the control plane waits for a row lock (the trigger's start)."""
    waiting = await pg.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
    )
    return int(waiting) > 0


async def pending_triggers(pg: asyncpg.Connection, run_id: str) -> int:
    return int(
        await pg.fetchval(
            "SELECT count(*) FROM dependency_triggers WHERE upstream_run_id = $1 AND done_at IS NULL", run_id
        )
    )


async def test_a_killed_control_plane_starts_each_dependent_run_once_after_restart_and_with_two(
    database_url: str, tmp_path: Path, tenant: Tenant, pg: asyncpg.Connection, watcher: asyncpg.Connection
) -> None:
    env = settings_env(database_url, tmp_path / "data")
    port = free_port()
    log_path = tmp_path / "server.log"
    server = start_live_server(env, log_path, port=port)
    second: LiveServer | None = None
    api = Api(server.url, tenant.org, tenant.token)
    try:
        api.settings("", {"require_approval": False})
        network = repo(tmp_path, "network", NETWORK)
        api.create_stack("network", network)
        api.create_stack("cluster", repo(tmp_path, "cluster", CLUSTER))
        body = {"depends_on": [{"stack": "network", "outputs": {"vpc_id": "vpc_id"}}]}
        assert (
            api.http.put(f"{api.o}/stacks/cluster/dependencies", content=json.dumps(body)).status_code == 200
        )

        first = api.start("network", "apply")
        api.wait(first, "applying")
        lock = await hold_stack_lock(pg, tenant.org, "cluster")
        api.wait(first, "applied")
        # The apply has committed with its trigger; the control plane has claimed the trigger
        # and waits to write the dependent's run: it dies right there.
        await until(lambda: blocked_on_a_lock(watcher), 30, "the trigger's start to wait for the lock")
        kill(server)
        await lock.rollback()
        assert await pending_triggers(pg, first) == 1
        assert await pg.fetchval("SELECT count(*) FROM runs WHERE trigger_upstream_run_id = $1", first) == 0

        server = start_live_server(env, log_path, port=port)
        started = wait_until(
            lambda: cluster_runs(api, first) or None, 60, "the dependent's run after restart"
        )
        assert len(started) == 1
        api.wait(started[0]["id"], "planned")
        assert len(cluster_runs(api, first)) == 1
        assert await pending_triggers(pg, first) == 0

        # Two control planes on one database: each carries out triggers, and still one run starts.
        second = start_live_server(env, tmp_path / "second.log", port=free_port())
        network.commit({"main.tf": NETWORK.replace("10.0.0.0/16", "10.1.0.0/16")}, "New range")
        moved = api.start("network", "apply")
        api.wait(moved, "applying")
        lock = await hold_stack_lock(pg, tenant.org, "cluster")
        api.wait(moved, "applied")
        await until(lambda: blocked_on_a_lock(watcher), 30, "a trigger's start to wait for the lock")
        await lock.rollback()
        started = wait_until(lambda: cluster_runs(api, moved) or None, 60, "the dependent's second run")
        api.wait(started[0]["id"], "planned")
        assert len(cluster_runs(api, moved)) == 1
        assert await pg.fetchval("SELECT count(*) FROM runs WHERE trigger_upstream_run_id = $1", moved) == 1
    finally:
        api.close()
        stop_live_server(server)
        if second is not None:
            stop_live_server(second)
