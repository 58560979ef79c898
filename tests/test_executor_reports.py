"""Reports sent together (POST /reports): recorded in order in one transaction, all or none; the
executor sends what it made while a request was out as one request, a step's end after its log;
and the spec request is the phase's first heartbeat."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from conftest import Tenant, make_stack
from firstlume.db.models import Run
from firstlume.db.types import utcnow
from firstlume.executor.client import ControlPlaneError
from firstlume.executor.heartbeat import Heartbeat
from firstlume.executor.reports import OrderedReports
from firstlume.launchers.base import PhaseLaunch
from firstlume.protocol.executor import CommitEntry, Report, StateBackendsEntry, StepEntry
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.runs import start
from support.snapshot import snapshot
from support.waiting import until

E = "/api/v1/executor"


@pytest.fixture
async def phase(ctx: Context, tenant: Tenant) -> PhaseLaunch:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    await start(ctx, tenant.token, tenant.org, "net", "apply")
    [launch] = await dispatch.claim_plans(ctx)
    return launch


def bearer(launch: PhaseLaunch) -> dict[str, str]:
    return {"Authorization": f"Bearer {launch.token}"}


async def post_reports(client: httpx.AsyncClient, launch: PhaseLaunch, reports: list[Any]) -> httpx.Response:
    return await client.post(f"{E}/reports", headers=bearer(launch), content=json.dumps({"reports": reports}))


def step(name: str, status: str) -> dict[str, str]:
    return {"kind": "step", "name": name, "status": status}


COMMIT = {"kind": "commit", "sha": "a" * 40, "author": "Ada <ada@example.com>", "message": "Add VPC\n\nbody"}


async def test_a_batch_is_recorded_in_order_as_its_reports_would_be_one_by_one(
    client: httpx.AsyncClient, phase: PhaseLaunch, tenant: Tenant
) -> None:
    response = await post_reports(
        client,
        phase,
        [
            step("checkout", "running"),
            COMMIT,
            {"kind": "configuration", "config_yaml": None, "engine": "terraform", "variables": []},
            step("checkout", "done"),  # ends the step the same batch started
            step("init", "running"),
            {"kind": "state_backends", "backends": [{"unit": ".", "backend": "s3"}]},
        ],
    )
    assert response.status_code == 204, response.text

    run = (await client.get(f"/api/v1/orgs/{tenant.org}/runs/{phase.run_id}", headers=tenant.headers)).json()
    assert [(s["name"], s["status"]) for s in run["steps"]] == [("checkout", "done"), ("init", "running")]
    assert (run["commit"]["sha"], run["commit"]["message"]) == ("a" * 40, "Add VPC")
    assert run["state_backends"] == [{"unit": ".", "backend": "s3"}]
    # Sent again after a lost answer, the same batch changes nothing and is not refused.
    again = await post_reports(client, phase, [step("checkout", "done"), step("init", "running")])
    assert again.status_code == 204


async def test_a_refused_report_undoes_its_whole_batch_and_is_named(
    client: httpx.AsyncClient, phase: PhaseLaunch, ctx: Context
) -> None:
    before = await snapshot(ctx)

    # The third report ends a step that never started: the commit and the step start before it
    # are not kept either.
    response = await post_reports(client, phase, [step("checkout", "running"), COMMIT, step("init", "done")])

    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "step_out_of_order" and error["report"] == 2
    assert error["message"].startswith("Report 2 (step): Step 'init' is not started")
    assert await snapshot(ctx) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reports": [{"kind": "logs", "offset": 0}]}, "reports[0].kind"),
        ({"reports": [{"name": "plan", "status": "running"}]}, "reports[0].kind"),
        ({"reports": [step("plan", "running"), {"kind": "step", "name": "plan", "status": "pending"}]}, "reports[1].status"),
        ({"reports": [{**COMMIT, "token": "s3cr3t-value"}]}, "reports[0].token"),
        ({"reports": []}, "reports"),
        ({"reports": [step("plan", "running")] * 101}, "reports"),
    ],
)  # fmt: skip
async def test_a_malformed_batch_is_refused_naming_the_field_and_changes_nothing(
    client: httpx.AsyncClient, phase: PhaseLaunch, ctx: Context, body: dict[str, Any], field: str
) -> None:
    before = await snapshot(ctx)

    response = await client.post(f"{E}/reports", headers=bearer(phase), content=json.dumps(body))

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["field"] == field
    assert f"'{field}'" in error["message"] and "s3cr3t" not in response.text
    assert await snapshot(ctx) == before


async def test_the_spec_request_is_the_phases_first_heartbeat(
    client: httpx.AsyncClient, phase: PhaseLaunch, ctx: Context
) -> None:
    long_ago = utcnow() - timedelta(hours=1)
    async with ctx.db.transaction() as session:
        await session.execute(update(Run).where(Run.id == phase.run_id).values(heartbeat_at=long_ago))

    asked = utcnow()
    assert (await client.get(f"{E}/spec", headers=bearer(phase))).status_code == 200

    async with ctx.db.read() as session:
        run = await session.get(Run, phase.run_id)
        assert run is not None and run.heartbeat_at is not None
        assert run.heartbeat_at >= asked - timedelta(seconds=1)


# -- the executor's side --------------------------------------------------------------------------


class HeldSink:
    """Records each request's reports; every request waits until the test lets it through."""

    def __init__(self) -> None:
        self.requests: list[list[str]] = []
        self.events: list[str] = []
        self.release = asyncio.Event()
        self.refuse: ControlPlaneError | None = None

    async def report(self, reports: list[Report]) -> None:
        self.requests.append([describe(r) for r in reports])
        self.events.append("request")
        await self.release.wait()
        if self.refuse is not None:
            raise self.refuse


def describe(report: Report) -> str:
    if isinstance(report, StepEntry):
        return f"{report.name} {report.status}"
    return report.kind


def entry(name: str, status: str) -> StepEntry:
    return StepEntry.model_validate(step(name, status))


async def test_reports_made_while_a_request_is_out_go_together_in_order() -> None:
    sink = HeldSink()
    reports = OrderedReports(sink)

    reports.send(entry("checkout", "running"))
    await until(lambda: len(sink.requests) == 1, 5, "the first report to go out at once")
    reports.send(CommitEntry.model_validate(COMMIT))
    reports.send(entry("checkout", "done"))
    reports.send(entry("init", "running"))
    reports.send(StateBackendsEntry.model_validate({"kind": "state_backends", "backends": []}))
    assert len(sink.requests) == 1  # the rest wait for the request out

    sink.release.set()
    await reports.stop()

    assert sink.requests == [
        ["checkout running"],
        ["commit", "checkout done", "init running", "state_backends"],
    ]
    assert reports.requests_sent == 2


async def test_a_request_that_ends_a_step_ships_the_log_first() -> None:
    sink = HeldSink()
    sink.release.set()

    async def ship_log() -> None:
        sink.events.append("log shipped")

    reports = OrderedReports(sink, before_step_end=ship_log)
    reports.send(entry("plan", "running"))
    await reports.flush()
    reports.send(entry("plan", "done"))
    await reports.stop()

    assert sink.events == ["request", "log shipped", "request"]


async def test_a_refused_batch_is_raised_by_flush_and_later_reports_are_not_sent() -> None:
    sink = HeldSink()
    sink.refuse = ControlPlaneError("Report 0 (step): refused")
    sink.release.set()
    reports = OrderedReports(sink)

    reports.send(entry("checkout", "running"))
    with pytest.raises(ControlPlaneError, match="refused"):
        await reports.flush()
    reports.send(entry("checkout", "done"))
    with pytest.raises(ControlPlaneError):
        await reports.stop()

    assert sink.requests == [["checkout running"]]


class CountingBeats:
    def __init__(self) -> None:
        self.beats = 0

    async def heartbeat(self) -> None:
        self.beats += 1


async def test_the_first_heartbeat_waits_one_interval() -> None:
    sink = CountingBeats()
    beat = Heartbeat(sink, 0.2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await beat.start()
    try:
        for _ in range(20):
            await asyncio.sleep(0)  # the heartbeat task runs as far as it would go at once
        assert sink.beats == 0
        await until(lambda: sink.beats >= 1, 5, "the first heartbeat")
        assert loop.time() - started >= 0.2
    finally:
        await beat.stop()
