"""A run that applies without approval has its apply's executor launched as soon as its plan's
init ends (services/prepared.py): the prepared apply gets its spec, waits on `GET /plan`, and
begins when the plan's result claims the apply, which adopts it rather than launching another.
Every other end of the plan (approval after all, a failure) or the prepared executor's death
leaves the lifecycle as it was."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from conftest import Tenant, make_stack
from firstlume.launchers.base import ExecutorDied, PhaseRef
from firstlume.scheduler.loop import Scheduler
from firstlume.services import dispatch, prepared
from support.executor_api import ExecutorReports
from support.runs import CREATE_ONE, start, status_of
from test_scheduler_wake import PassWatchingLauncher

SHA = "0123456789abcdef0123456789abcdef01234567"
CHECKED_OUT_AND_INITIALIZED: dict[str, Any] = {
    "reports": [
        {"kind": "step", "name": "checkout", "status": "running"},
        {"kind": "commit", "sha": SHA, "author": "Ada <ada@example.com>", "message": "Add net", "url": None},
        {"kind": "step", "name": "checkout", "status": "done"},
        {"kind": "step", "name": "init", "status": "running"},
        {"kind": "step", "name": "init", "status": "done"},
    ]
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Served:
    """The in-process app with a scheduler over a recording launcher, approval as given."""

    def __init__(self, app: Starlette, client: httpx.AsyncClient, tenant: Tenant) -> None:
        self.ctx = app.state.ctx
        self.client, self.tenant = client, tenant
        self.launcher = PassWatchingLauncher()
        self.scheduler = Scheduler(self.ctx, self.launcher)  # type: ignore[arg-type]

    async def __aenter__(self) -> Served:
        self.ctx.settings = self.ctx.settings.model_copy(update={"scheduler_interval": 3600.0})
        await make_stack(self.ctx, self.tenant, {"slug": "net", "repository": "file:///repo"})
        ctx = self.ctx
        ctx.wake_scheduler, ctx.launch_claimed, ctx.prepares_applies = (
            self.scheduler.wake,
            self.scheduler.launch_claimed,
            True,
        )
        await self.scheduler.start()
        await asyncio.wait_for(self.launcher.pass_ended.wait(), timeout=10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.ctx.wake_scheduler = self.ctx.launch_claimed = None
        self.ctx.prepares_applies = False
        await self.scheduler.stop()

    async def require_approval(self, required: bool) -> None:
        body = '{"require_approval": %s}' % ("true" if required else "false")
        answer = await self.client.patch(
            "/api/v1/orgs/acme/settings", headers=self.tenant.headers, content=body
        )
        assert answer.status_code == 200, answer.text

    async def launched(self, count: int) -> list[tuple[str, str]]:
        """Waits until the launcher has seen `count` launches; returns them."""
        async with asyncio.timeout(10):
            while len(self.launcher.launched) < count:
                self.launcher.launch_seen.clear()
                await self.launcher.launch_seen.wait()
        return self.launcher.launched

    async def launched_anew(self, run_id: str, prepared_token: str) -> dict[str, Any]:
        """Waits for the apply's second launch, with a token of its own, not prepared; the
        prepared one is dead. Returns the new executor's spec."""
        assert await self.launched(3) == [(run_id, "plan"), (run_id, "apply"), (run_id, "apply")]
        fresh_token = self.launcher.tokens[2]
        assert fresh_token != prepared_token
        spec = await self.client.get("/api/v1/executor/spec", headers=bearer(fresh_token))
        assert spec.status_code == 200 and spec.json()["prepared"] is False, spec.text
        stale = await self.client.get("/api/v1/executor/spec", headers=bearer(prepared_token))
        assert stale.status_code == 401, stale.text
        return spec.json()  # type: ignore[no-any-return]

    async def prepared_run(self) -> tuple[str, ExecutorReports, str]:
        """An apply run without approval whose plan has initialized, its apply prepared: the
        run, its plan's reports, the prepared apply's token."""
        await self.require_approval(False)
        run_id, plan = await self.planning_run()
        assert await self.launched(2) == [(run_id, "plan"), (run_id, "apply")]
        return run_id, plan, self.launcher.tokens[1]

    async def planning_run(self) -> tuple[str, ExecutorReports]:
        """An apply run whose plan's executor has checked out and initialized."""
        run_id = await start(self.ctx, self.tenant.token, self.tenant.org, "net", "apply")
        assert await self.launched(1) == [(run_id, "plan")]
        plan = ExecutorReports(self.client, self.launcher.tokens[0])
        await plan.post("reports", CHECKED_OUT_AND_INITIALIZED)
        return run_id, plan


@pytest.fixture
async def served(app: Starlette, client: httpx.AsyncClient, tenant: Tenant) -> Any:
    async with Served(app, client, tenant) as plane:
        yield plane


async def test_the_apply_is_prepared_while_its_plan_runs_and_begins_with_the_plans_result(
    served: Served,
) -> None:
    await served.require_approval(False)
    run_id, plan = await served.planning_run()

    # The plan's init has ended: the apply's executor is launched, the run still planning.
    assert await served.launched(2) == [(run_id, "plan"), (run_id, "apply")]
    assert await status_of(served.ctx, run_id) == "planning"
    apply_token = served.launcher.tokens[1]
    spec = await served.client.get("/api/v1/executor/spec", headers=bearer(apply_token))
    assert spec.status_code == 200, spec.text
    assert (spec.json()["phase"], spec.json()["prepared"], spec.json()["commit_sha"]) == ("apply", True, SHA)
    # Before its apply begins, the token is good for its spec and its wait only.
    for path in ("heartbeat", "reports", "finish"):
        refused = await served.client.post(f"/api/v1/executor/{path}", headers=bearer(apply_token), json={})
        assert refused.status_code == 401, (path, refused.text)

    waiting = asyncio.create_task(served.client.get("/api/v1/executor/plan", headers=bearer(apply_token)))
    await plan.log("plan", "Plan: 1 to add.\n")
    await plan.plan(CREATE_ONE)
    assert not waiting.done()  # the plan is stored, but the apply has not begun
    assert await plan.finish() == "applying"

    answer = await asyncio.wait_for(waiting, timeout=10)
    assert answer.status_code == 200, answer.text
    download = answer.json()
    assert [c["address"] for c in download["changes"]] == ["terraform_data.a"]
    assert download["log_offset"] == len("Plan: 1 to add.\n")
    # The result adopted the prepared apply: nothing else was launched, and its token is the phase's.
    assert served.launcher.launched == [(run_id, "plan"), (run_id, "apply")]
    beat = await served.client.post("/api/v1/executor/heartbeat", headers=bearer(apply_token))
    assert beat.status_code == 204, beat.text
    assert await status_of(served.ctx, run_id) == "applying"


async def test_a_plan_whose_apply_needs_approval_prepares_nothing(served: Served) -> None:
    await served.require_approval(True)
    run_id, plan = await served.planning_run()
    await plan.plan(CREATE_ONE)
    assert await plan.finish() == "awaiting_approval"
    assert served.launcher.launched == [(run_id, "plan")]


async def test_a_prepared_apply_whose_plan_ends_needing_approval_stops_and_the_approved_apply_starts_anew(
    served: Served,
) -> None:
    run_id, plan, prepared_token = await served.prepared_run()
    waiting = asyncio.create_task(served.client.get("/api/v1/executor/plan", headers=bearer(prepared_token)))
    # The rule is read again when the plan finishes: now it requires approval.
    await served.require_approval(True)
    await plan.plan(CREATE_ONE)
    assert await plan.finish() == "awaiting_approval"

    answer = await asyncio.wait_for(waiting, timeout=10)
    assert answer.status_code == 401, answer.text

    approved = await served.client.post(
        f"/api/v1/orgs/acme/runs/{run_id}/approve", headers=served.tenant.headers, json={"acknowledged": []}
    )
    assert approved.status_code == 200, approved.text
    spec = await served.launched_anew(run_id, prepared_token)
    # The prepared attempt (2) is spent: the approved apply is attempt 3, so the prepared
    # executor's exit, reported however late, is not taken for the apply's.
    assert spec["attempt"] == 3
    late_exit = ExecutorDied(PhaseRef(run_id, "apply", 2), "the executor exited with code 2")
    assert await dispatch.on_executor_died(served.ctx, late_exit) is False
    assert await status_of(served.ctx, run_id) == "applying"


async def test_a_prepared_apply_whose_executor_died_is_launched_anew_by_the_plans_result(
    served: Served,
) -> None:
    run_id, plan, prepared_token = await served.prepared_run()
    # Its death, before its apply began, fails nothing: the run is still planning.
    died = ExecutorDied(PhaseRef(run_id, "apply", 2), "the executor exited with code 1")
    assert await dispatch.on_executor_died(served.ctx, died) is False
    assert await status_of(served.ctx, run_id) == "planning"

    await plan.plan(CREATE_ONE)
    assert await plan.finish() == "applying"
    await served.launched_anew(run_id, prepared_token)


async def test_a_prepared_apply_asks_again_when_its_plan_takes_long(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prepared, "WAIT_SECONDS", 0.05)
    run_id, _, prepared_token = await served.prepared_run()

    answer = await served.client.get("/api/v1/executor/plan", headers=bearer(prepared_token))

    assert (answer.status_code, answer.content) == (204, b"")
    assert await status_of(served.ctx, run_id) == "planning"


async def test_a_plan_that_fails_ends_its_prepared_apply(served: Served) -> None:
    _, plan, prepared_token = await served.prepared_run()
    waiting = asyncio.create_task(served.client.get("/api/v1/executor/plan", headers=bearer(prepared_token)))

    assert await plan.finish("failed", "terraform plan failed") == "failed"

    answer = await asyncio.wait_for(waiting, timeout=10)
    assert answer.status_code == 401, answer.text


async def test_a_prepared_apply_whose_managed_state_moved_since_the_plan_fails_before_it_applies(
    served: Served,
) -> None:
    from test_state_api import state_doc

    await served.require_approval(False)
    run_id = await start(served.ctx, served.tenant.token, served.tenant.org, "net", "apply")
    await served.launched(1)
    plan = ExecutorReports(served.client, served.launcher.tokens[0])
    managed = {"kind": "state_backends", "backends": [{"unit": ".", "backend": "firstlume"}]}
    await plan.post("reports", {"reports": [*CHECKED_OUT_AND_INITIALIZED["reports"], managed]})
    await served.launched(2)
    await plan.plan(CREATE_ONE)
    # Somebody writes the state between the plan's upload and its result (the prepared apply's
    # spec, which came earlier, could not have seen it).
    state = f"/api/v1/orgs/{served.tenant.org}/stacks/net/state"
    written = await served.client.post(state, content=state_doc(1), headers=served.tenant.headers)
    assert written.status_code == 200, written.text
    assert await plan.finish() == "applying"

    answer = await served.client.get("/api/v1/executor/plan", headers=bearer(served.launcher.tokens[1]))

    assert answer.status_code == 409 and answer.json()["error"]["code"] == "state_changed", answer.text
    assert await status_of(served.ctx, run_id) == "failed"


def test_only_the_local_launcher_prepares_applies() -> None:
    # A Kubernetes Job takes seconds to be scheduled, and one that died before its apply began
    # would go unnoticed until the heartbeat timeout: its applies are launched when they begin.
    from firstlume.launchers.kubernetes import KubernetesLauncher
    from firstlume.launchers.local import LocalLauncher

    assert LocalLauncher.prepares_applies is True
    assert getattr(KubernetesLauncher, "prepares_applies", False) is False


async def test_a_prepared_apply_reads_its_stacks_state_and_writes_nothing_before_its_apply_begins(
    served: Served,
) -> None:
    from test_state_api import lock_info, state_doc

    state = f"/api/v1/orgs/{served.tenant.org}/stacks/net/state"
    written = await served.client.post(state, content=state_doc(1), headers=served.tenant.headers)
    assert written.status_code == 200, written.text
    _, _, prepared_token = await served.prepared_run()

    # Its `terraform init` reads the state while the plan holds the lock...
    read = await served.client.get(state, headers=bearer(prepared_token))
    assert read.status_code == 200 and read.content == state_doc(1), read.text
    # ...and neither locks nor writes it until its apply begins.
    lock = await served.client.request(
        "LOCK", f"{state}/lock", content=lock_info("L1"), headers=bearer(prepared_token)
    )
    assert lock.status_code == 401, lock.text
    write = await served.client.post(state, content=state_doc(2), headers=bearer(prepared_token))
    assert write.status_code == 401, write.text
