"""PostgreSQL ends every connection of a served control plane (as a database restart does) again
and again while real runs are claimed, launched, planned and reported: every request that
committed is answered 2xx, no launch is lost (each run ends `planned`, none waits for the
heartbeat timeout), and the server logs no 500."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import _sqlalchemy_pg_url, settings_env, start_live_server, stop_live_server
from firstlume.keys import load_keyring
from firstlume.pubsub import PubSub
from firstlume.services.context import Context
from firstlume.settings import Settings
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform
from test_event_delivery import pg_database, terminate  # noqa: F401  (a fixture and a helper)

MAIN = 'resource "terraform_data" "one" { input = "x" }\n'
RUNS = 4


@pytest.fixture
def tenant_token(pg_database: str, tmp_path: Path) -> Iterator[str]:
    from conftest import make_tenant
    from firstlume.db.engine import Database

    url = _sqlalchemy_pg_url(pg_database)
    settings = Settings.from_env(settings_env(url, tmp_path / "data", FIRSTLUME_SCHEDULER="off"))

    async def make() -> str:
        db = Database(url)
        ctx = Context(settings=settings, db=db, keyring=load_keyring(settings), pubsub=PubSub("memory://"))
        tenant = await make_tenant(ctx, "acme", "ada@example.com")
        await db.dispose()
        return tenant.token

    yield asyncio.run(make())


@requires_terraform
def test_runs_survive_postgresql_ending_the_servers_connections(
    pg_database: str,
    tenant_token: str,
    tmp_path: Path,
) -> None:
    url = _sqlalchemy_pg_url(pg_database)
    # A heartbeat timeout far beyond the test: a lost launch would show as a run never ending.
    env = settings_env(url, tmp_path / "data", FIRSTLUME_HEARTBEAT_TIMEOUT="600")
    server = start_live_server(env, tmp_path / "server.log")
    api = Api(server.url, "acme", tenant_token)
    try:
        for i in range(RUNS):
            (tmp_path / f"s{i}").mkdir()
            api.create_stack(f"s{i}", make_stack_repo(tmp_path / f"s{i}", MAIN))
        answers: list[int] = []
        run_ids: list[str] = []
        ended = 0
        deadline = time.monotonic() + 12
        i = 0
        while time.monotonic() < deadline:
            if i < RUNS:
                response = api.http.post(f"{api.o}/stacks/s{i}/runs", json={"type": "plan"})
                answers.append(response.status_code)
                if response.status_code == 201:
                    run_ids.append(response.json()["id"])
                i += 1
            ended += asyncio.run(terminate(pg_database))
            time.sleep(0.7)  # the pace of the blips: a disruption, not a wait
        assert ended >= 10
        # A start that was refused (the database gone mid-request) is a 503, never a 500.
        assert set(answers) <= {201, 503}, answers
        assert len(run_ids) >= RUNS - 1
        for run_id in run_ids:
            run = api.wait(run_id, "planned", timeout=120)
            assert run["error"] is None
        log = server.log()
        assert " 500 " not in log and "internal_error" not in log, log[-3000:]
    finally:
        api.close()
        stop_live_server(server)
