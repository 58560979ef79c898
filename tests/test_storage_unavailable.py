"""A database that refuses every write (PostgreSQL with default_transaction_read_only, SQLite with
query_only: real refusals of the real databases, in process): reads are served, every change
gets a JSON 503 `storage_unavailable` with Retry-After over REST and GraphQL, /readyz reports the
storage, and it all works again once the database is writable, without a restart. Whatever a
route lets through still gets the JSON shape and leaves the connection open. The served,
full-disk version is tests/e2e/test_full_disk.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.util import await_
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from conftest import Tenant, make_stack
from firstlume.api.middleware import RequestMiddleware
from firstlume.db.engine import Database
from firstlume.db.models import Run
from firstlume.domain.errors import StorageUnavailable
from firstlume.domain.runs import StepStatus
from firstlume.executor.client import ControlPlaneUnavailable, ExecutorClient
from firstlume.executor.phase import PhaseRunner
from firstlume.protocol.executor import PhaseResult, StepEntry
from firstlume.services import dispatch
from firstlume.services.storage import STORAGE_SETTLE_SECONDS, StorageWatch, storage_failure
from support.runs import start


class WriteRefusal:
    """Makes every connection `db` opens refuse writes (on), or not (off); the pool starts afresh."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _refuse_writes(self, dbapi_connection: Any, _record: Any) -> None:
        if self.db.is_sqlite:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA query_only = ON")
            cursor.close()
        else:
            # Outside a transaction, so that no rollback undoes it.
            await_(dbapi_connection.driver_connection.execute("SET default_transaction_read_only = on"))

    async def on(self) -> None:
        event.listen(self.db.engine.sync_engine, "connect", self._refuse_writes)
        await self.db.engine.dispose()

    async def off(self) -> None:
        event.remove(self.db.engine.sync_engine, "connect", self._refuse_writes)
        await self.db.engine.dispose()


@asynccontextmanager
async def only_reads(db: Database) -> AsyncIterator[None]:
    refusal = WriteRefusal(db)
    await refusal.on()
    try:
        yield
    finally:
        await refusal.off()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    if "error" in body:
        return body["error"]  # type: ignore[no-any-return]
    return {"code": body["errors"][0]["extensions"]["code"], "message": body["errors"][0]["message"]}


def refused_for_storage(response: httpx.Response) -> bool:
    return (
        response.status_code == 503
        and error_of(response)["code"] == "storage_unavailable"
        and response.headers["retry-after"] == "5"
    )


async def test_reads_are_served_and_changes_refused_with_json_503_until_the_database_writes_again(
    app: Starlette, client: httpx.AsyncClient, tenant: Tenant
) -> None:
    o = f"/api/v1/orgs/{tenant.org}"
    created = await client.post(f"{o}/tokens", json={"name": "fresh"}, headers=tenant.headers)
    # Its first use is recorded when a read is served: a write the database refuses now.
    fresh = {"Authorization": f"Bearer {created.json()['token']}"}
    clock = Clock()
    app.state.ctx.storage = StorageWatch(clock=clock)
    mutation = f'mutation {{ setVariable(org: "{tenant.org}", name: "m", value: "v") {{ __typename }} }}'

    async with only_reads(app.state.ctx.db):
        read = await client.get(f"{o}/variables", headers=fresh)
        assert read.status_code == 200, read.text
        change = await client.put(f"{o}/variables/x", json={"value": "x"}, headers=tenant.headers)
        assert refused_for_storage(change), change.text
        assert "read-only" in error_of(change)["message"]
        query = await client.post("/graphql", json={"query": "{ viewer { email } }"}, headers=fresh)
        assert query.status_code == 200 and query.json()["data"]["viewer"]["email"] == tenant.email
        refused = await client.post("/graphql", json={"query": mutation}, headers=tenant.headers)
        assert refused_for_storage(refused), refused.text
        ready = await client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["code"] == "storage_unavailable", ready.text

    change = await client.put(f"{o}/variables/x", json={"value": "x"}, headers=tenant.headers)
    assert change.status_code in (200, 201), change.text
    accepted = await client.post("/graphql", json={"query": mutation}, headers=tenant.headers)
    assert accepted.status_code == 200 and accepted.json()["data"]["setVariable"]["__typename"] == "Variable"
    # Ready again once the failures are older than the settling time (the probe row is written).
    assert (await client.get("/readyz")).status_code == 503
    clock.now += STORAGE_SETTLE_SECONDS + 1
    ready = await client.get("/readyz")
    assert ready.status_code == 200, ready.text


def failing_app(error: Exception) -> Callable[[Scope, Receive, Send], Any]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise error

    return RequestMiddleware(app)


async def test_an_error_a_route_lets_through_is_answered_in_json_not_raised() -> None:
    transport = httpx.ASGITransport(app=failing_app(RuntimeError("a bug")))  # raises what the app raises
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        response = await http.get("/api/v1/anything")
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert "a bug" not in response.text
    assert response.headers["x-request-id"]


async def test_a_storage_failure_a_route_lets_through_is_a_json_503() -> None:
    import sqlite3

    transport = httpx.ASGITransport(app=failing_app(sqlite3.OperationalError("database or disk is full")))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        response = await http.get("/api/v1/anything")
    assert refused_for_storage(response)
    assert "disk is full" in error_of(response)["message"]


def test_a_run_failed_of_storage_says_so_first_and_once() -> None:
    import sqlite3

    full = storage_failure(sqlite3.OperationalError("database or disk is full"))
    assert full is not None and full.kind == "full"
    reason = dispatch.blame_storage(full, "The executor sent no heartbeat for 4 seconds.")
    assert reason.startswith("storage full: the database's disk was full")
    assert reason.endswith("The executor sent no heartbeat for 4 seconds.")
    assert dispatch.blame_storage(full, reason) == reason


async def test_an_executor_refused_for_storage_stops_its_phase_and_reports_it_once_writes_work(
    app: Starlette, tenant: Tenant, tmp_path: Path
) -> None:
    ctx = app.state.ctx
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, tenant.org, "net", "plan")
    (launch,) = await dispatch.claim_plans(ctx)
    sleeps: list[float] = []
    writes = WriteRefusal(ctx.db)

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 4:
            await writes.off()  # the operator frees space

    executor = ExecutorClient(
        "http://cp", launch.token, transport=httpx.ASGITransport(app=app), max_attempts=2, sleep=sleep
    )
    await writes.on()
    with pytest.raises(ControlPlaneUnavailable):
        await executor.report([StepEntry(kind="step", name="checkout", status=StepStatus.RUNNING)])
    refusal = executor.storage_refusal()
    assert refusal is not None and refusal.path == "/reports"
    assert (refusal.kind, refusal.prefix, refusal.retry_after) == ("read_only", "storage read-only", 5.0)

    # Refused for as long as the heartbeat timeout: the phase stops, storage named first.
    runner = PhaseRunner(executor, tmp_path, base_env={})
    runner._storage_patience = 0.0
    await asyncio.wait_for(runner._watch_storage(0.001), 5)
    reason = runner._stop_reason
    assert reason is not None and reason.startswith(
        "storage read-only: the control plane could not store this phase's reports for 0 seconds"
    )

    # Its result is tried again until a write succeeds.
    answer = await executor.finish(PhaseResult.FAILED, reason, storage_patience=600)
    assert answer.status == "failed" and len(sleeps) >= 4
    assert "/finish" not in executor._storage_refused
    async with ctx.db.read() as session:
        run = await session.get(Run, run_id)
        assert run is not None and (run.status, run.error) == ("failed", reason)
    await executor.aclose()


def test_a_lost_connection_does_not_make_the_storage_unavailable_for_readiness() -> None:
    clock = Clock()
    watch = StorageWatch(clock=clock)
    gone = storage_failure(ConnectionResetError("the database connection was lost"))
    lost = gone or StorageUnavailable("The database connection was lost; retry in a moment.", kind="gone")
    watch.failed(lost)
    assert watch.recent() is None
    full = StorageUnavailable("full", kind="full")
    watch.failed(full)
    assert watch.recent() is full
    clock.now += STORAGE_SETTLE_SECONDS + 1
    assert watch.recent() is None
