"""A canceled run's executor leftovers are cleaned up by the scheduler, never by the API.

The scheduler hears of the cancellation on its channel, or finds it reading the database (an
event another replica published while this one was down); either way the Kubernetes launcher
deletes the run's Jobs and token Secrets (the Kubernetes API is the in-memory stand-in)."""

from __future__ import annotations

import ast
import base64
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conftest import Tenant, make_stack
from firstlume.domain.runs import RunStatus
from firstlume.launchers import manifests
from firstlume.launchers.kubernetes import KubernetesLauncher
from firstlume.protocol.events import RunStatusChanged
from firstlume.scheduler.loop import Scheduler
from firstlume.services import accounts, dispatch, runs
from firstlume.services.commands import ApproveRun, CancelRun
from firstlume.services.context import Context
from firstlume.services.outbox import OutboxRelay
from firstlume.settings import KubernetesSettings
from support.fake_kube import FakeClock, FakeKube
from support.launchers import QuietLauncher
from support.runs import CREATE_ONE, report, start, status_of
from support.waiting import until

API = Path(__file__).resolve().parents[1] / "backend" / "firstlume" / "api"
TIMEOUT = 10.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def kube(clock: FakeClock) -> FakeKube:
    return FakeKube(clock)


@pytest.fixture
async def launcher(kube: FakeKube, clock: FakeClock) -> AsyncIterator[KubernetesLauncher]:
    config = KubernetesSettings(
        image="registry.example/firstlume:1.0",
        namespace="firstlume-runs",
        watch_timeout_seconds=3,
        health_check_interval_seconds=3600,  # only cancellation deletes anything here
    )
    launcher = KubernetesLauncher(
        config, batch_api=kube.batch, core_api=kube.core, clock=clock, retry_delay=0.05
    )
    yield launcher
    await launcher.close()


def token_of(kube: FakeKube, launch_job: str) -> str:
    (secret,) = [s for s in kube.secrets() if s.metadata.name == f"{launch_job}-token"]
    return base64.b64decode(secret.data[manifests.TOKEN_KEY]).decode()


async def planned_then_canceled(ctx: Context, tenant: Tenant, kube: FakeKube, run_id: str) -> None:
    """The plan's executor reports (its Job stays, finished), the plan is approved and, in the
    same transaction, canceled: the run never leaves apply_queued for a scheduler to see."""
    job = manifests.job_name(run_id, "plan", 1)
    token = token_of(kube, job)
    await report(ctx, token, "plan", {"plan_file_b64": "cGxhbg==", "plan_json": CREATE_ONE, "variables": []})
    await report(ctx, token, "finish", {"status": "succeeded"})
    assert await status_of(ctx, run_id) == "awaiting_approval"
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        await runs.approve_run(unit, actor, org, run_id, ApproveRun(acknowledged=[]))
        await runs.cancel_run(unit, actor, org, run_id, CancelRun())
    assert await status_of(ctx, run_id) == "canceled"


async def test_the_scheduler_hears_of_a_cancellation_and_deletes_the_runs_jobs(
    ctx: Context, tenant: Tenant, kube: FakeKube, launcher: KubernetesLauncher, relay: OutboxRelay
) -> None:
    await make_stack(ctx, tenant, {"slug": "network", "repository": "file:///repo"})
    await make_stack(ctx, tenant, {"slug": "other", "repository": "file:///repo"})
    # Reading the database happens once, at start: only the event can tell of what follows.
    scheduler = Scheduler(ctx, launcher, cancel_reconcile_seconds=3600)
    await scheduler.start()
    try:
        run_id = await start(ctx, tenant.token, tenant.org, "network", "apply")
        other = await start(ctx, tenant.token, tenant.org, "other", "plan")
        plan_job = manifests.job_name(run_id, "plan", 1)
        await until(lambda: {j.metadata.name for j in kube.jobs()} >= {plan_job}, TIMEOUT, "the plan's Job")
        await until(lambda: len(kube.jobs()) == 2, TIMEOUT, "the other run's Job")
        await planned_then_canceled(ctx, tenant, kube, run_id)
        await until(
            lambda: plan_job not in {j.metadata.name for j in kube.jobs()}, TIMEOUT, "the Job deleted"
        )
    finally:
        await scheduler.stop()
    assert [s.metadata.name for s in kube.secrets()] == [f"{manifests.job_name(other, 'plan', 1)}-token"]
    assert [j.metadata.name for j in kube.jobs()] == [manifests.job_name(other, "plan", 1)]
    assert [c["name"] for c in kube.calls_to("delete_namespaced_job")] == [plan_job]


async def test_a_cancellation_missed_while_down_is_found_in_the_database(
    ctx: Context, tenant: Tenant, kube: FakeKube, launcher: KubernetesLauncher
) -> None:
    await make_stack(ctx, tenant, {"slug": "network", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, tenant.org, "network", "apply")
    # A scheduler that is gone now launched the plan; the cancellation's event went unheard.
    (launch,) = await dispatch.claim_plans(ctx)
    await launcher.launch(launch)
    await planned_then_canceled(ctx, tenant, kube, run_id)
    assert len(kube.jobs()) == 1

    scheduler = Scheduler(ctx, launcher, cancel_reconcile_seconds=0)  # reads at every pass
    await scheduler.tick()  # not listening: only its reading can find the run
    assert kube.jobs() == [] and kube.secrets() == []

    def cleanups() -> int:
        selector = manifests.run_selector(launcher.config, run_id)
        return sum(1 for call in kube.calls_to("list_jobs") if call["label_selector"] == selector)

    assert cleanups() == 1
    await scheduler.tick()  # found again, but a run is cleaned up once
    assert cleanups() == 1


class FlakyCleanup(QuietLauncher):
    """A launcher whose first cleanup fails (the Kubernetes API answered 503)."""

    def __init__(self) -> None:
        self.canceled: list[str] = []
        self.failures = 1

    async def cancel(self, run_id: str) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("503 Service Unavailable")
        self.canceled.append(run_id)


async def test_a_failed_cleanup_is_retried_at_the_next_pass(ctx: Context, tenant: Tenant) -> None:
    await make_stack(ctx, tenant, {"slug": "network", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, tenant.org, "network", "plan")
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        await runs.cancel_run(unit, actor, org, run_id, CancelRun())
    launcher = FlakyCleanup()
    scheduler = Scheduler(ctx, launcher, cancel_reconcile_seconds=3600)
    await scheduler.tick()
    assert launcher.canceled == [] and launcher.failures == 0
    await scheduler.tick()
    assert launcher.canceled == [run_id]
    scheduler.notice(
        RunStatusChanged(run_id=run_id, org_id="org", status=RunStatus.CANCELED)
    )  # heard again later
    await scheduler.tick()
    assert launcher.canceled == [run_id]


def test_the_api_never_talks_to_a_launcher() -> None:
    for path in sorted(API.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("firstlume.launchers"), f"{path.name} imports {node.module}"
            if isinstance(node, ast.Attribute):
                assert node.attr != "launcher", f"{path.name}:{node.lineno} reaches for a launcher"
