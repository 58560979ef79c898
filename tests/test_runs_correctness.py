"""The logic behind issue 40's items 1-3, without Terraform: output changes read from a plan and
counted as changes; a drift run's base (the last successful apply); runs that wait while a person
holds the stack's state lock. The same behaviours with real Terraform: tests/e2e/
test_runs_correctness_terraform.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from conftest import Tenant, make_stack
from firstlume.db.models import OutputChange, Run, Stack, StateHead
from firstlume.domain.changes import SENSITIVE, UNKNOWN, Summary, output_changes_from_plan
from firstlume.domain.runs import (
    CANCELABLE,
    WAITS_FOR_STATE_LOCK,
    Phase,
    RunStatus,
    RunType,
    status_after_plan,
)
from firstlume.domain.state import lock_wait_reason
from firstlume.services import dispatch, phases
from firstlume.services.context import Context
from firstlume.services.drift.baseline import NoDriftBase
from firstlume.services.reads import runs as run_reads
from support.runs import plan_run, start, status_of


def _output(actions: list[str], before: Any, after: Any, **marks: Any) -> dict[str, Any]:
    return {
        "actions": actions,
        "before": before,
        "after": after,
        "after_unknown": marks.get("unknown", False),
        "before_sensitive": marks.get("sensitive", False),
        "after_sensitive": marks.get("sensitive", False),
    }


OUTPUTS_ONLY: dict[str, Any] = {
    "format_version": "1.2",
    "resource_changes": [],
    "output_changes": {
        "same": _output(["no-op"], "x", "x"),
        "size": _output(["update"], "small", "large"),
        "gone": _output(["delete"], "old", None),
        "password": _output(["create"], None, "hunter2-secret", sensitive=True),
        "later": _output(["create"], None, None, unknown=True),
    },
}


# -- domain ----------------------------------------------------------------------------------------


def test_output_changes_list_what_changes_by_name_and_skip_unchanged_outputs() -> None:
    found = {c.name: c for c in output_changes_from_plan(OUTPUTS_ONLY)}
    assert sorted(found) == ["gone", "later", "password", "size"]
    assert (found["size"].action, found["size"].before, found["size"].after) == ("update", "small", "large")
    assert (found["gone"].action, found["gone"].after) == ("delete", None)
    assert found["later"].after == UNKNOWN and found["later"].unit == "."


def test_sensitive_outputs_and_known_secrets_never_show_their_values() -> None:
    found = {c.name: c for c in output_changes_from_plan(OUTPUTS_ONLY, secrets=["large"])}
    assert (found["password"].before, found["password"].after, found["password"].sensitive) == (
        None,
        SENSITIVE,
        True,
    )
    # A value Firstlume holds as sensitive is masked even where Terraform does not mark it.
    assert found["size"].after == SENSITIVE and not found["size"].sensitive


def test_a_plan_of_outputs_only_has_changes_and_says_so() -> None:
    summary = Summary(delete=0, replace=0, update=0, create=0, outputs=2)
    assert summary.has_changes and summary.text == "2 output changes"
    assert summary.as_dict() == {"delete": 0, "replace": 0, "update": 0, "create": 0}
    assert Summary(0, 0, 1, 0, outputs=1).text == "1 update · 1 output change"
    assert status_after_plan(RunType.APPLY, summary.has_changes, True) == RunStatus.AWAITING_APPROVAL


def test_the_waiting_reason_says_who_holds_the_lock_and_since_when() -> None:
    now = datetime(2026, 12, 4, 11, 0, tzinfo=UTC)
    since = datetime(2026, 12, 4, 10, 42, 7, tzinfo=UTC)
    assert (
        lock_wait_reason("ada@example.com", since, ".", now)
        == "waiting for the state lock held by ada@example.com since 10:42 UTC"
    )
    assert lock_wait_reason("ada@example.com", since, "vpc", datetime(2026, 12, 5, tzinfo=UTC)) == (
        "waiting for the state lock held by ada@example.com on unit vpc since 2026-12-04 10:42 UTC"
    )


def test_a_run_waiting_for_a_state_lock_can_be_canceled() -> None:
    assert WAITS_FOR_STATE_LOCK <= CANCELABLE


# -- services, on both databases ---------------------------------------------------------------------


@pytest.fixture
async def stack(ctx: Context, tenant: Tenant) -> str:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///nowhere"})
    return "net"


async def _stack_id(ctx: Context) -> str:
    async with ctx.db.transaction() as session:
        stack_id = await session.scalar(select(Stack.id).where(Stack.slug == "net"))
        assert stack_id is not None
        return stack_id


async def _lock(ctx: Context, *, run_id: str | None = None, phase: Phase | None = None) -> None:
    stack_id = await _stack_id(ctx)
    async with ctx.unit() as unit:
        org_id = await unit.session.scalar(select(Stack.org_id).where(Stack.id == stack_id))
        unit.session.add(
            StateHead(
                org_id=org_id,
                stack_id=stack_id,
                unit=".",
                lock_id="L1",
                lock_info={"ID": "L1"},
                lock_holder="ada@example.com" if phase is None else "run #9 (plan phase)",
                lock_run_id=run_id,
                lock_phase=phase,
                locked_at=datetime(2026, 12, 4, 10, 42, tzinfo=UTC),
            )
        )


async def _unlock(ctx: Context) -> None:
    async with ctx.unit() as unit:
        await unit.session.execute(update(StateHead).values(lock_id=None, lock_holder=None, locked_at=None))


async def _waiting_for(ctx: Context, tenant: Tenant, run_id: str) -> str | None:
    async with ctx.db.transaction() as session:
        [run] = await run_reads.runs_by_id(session, [run_id])
        assert run is not None
        [details] = await run_reads.details(session, [run])
        return details.waiting_for


async def test_a_plan_of_outputs_only_goes_on_to_approval_with_its_outputs_stored(
    ctx: Context, tenant: Tenant, stack: str
) -> None:
    run_id = await start(ctx, tenant.token, tenant.org, stack, "apply")
    assert await plan_run(ctx, OUTPUTS_ONLY) == {run_id: RunStatus.AWAITING_APPROVAL}
    async with ctx.db.transaction() as session:
        run = await session.get(Run, run_id)
        assert run is not None and run.summary_outputs == 4
        rows = (await session.scalars(select(OutputChange).order_by(OutputChange.position))).all()
    assert [(r.name, r.action, r.after) for r in rows] == [
        ("gone", "delete", None),
        ("later", "create", UNKNOWN),
        ("password", "create", SENSITIVE),
        ("size", "update", "large"),
    ]


async def test_no_run_starts_while_a_person_holds_the_state_lock_and_each_says_why(
    ctx: Context, tenant: Tenant, stack: str
) -> None:
    await _lock(ctx)
    run_id = await start(ctx, tenant.token, tenant.org, stack, "plan")
    assert await dispatch.claim_plans(ctx) == []
    assert await status_of(ctx, run_id) == "queued"
    reason = await _waiting_for(ctx, tenant, run_id)
    assert reason is not None and reason.startswith(
        "waiting for the state lock held by ada@example.com since "
    )

    await _unlock(ctx)
    assert [c.run_id for c in await dispatch.claim_plans(ctx)] == [run_id]
    assert await _waiting_for(ctx, tenant, run_id) is None


async def test_a_lock_held_by_a_runs_phase_does_not_hold_runs_back(
    ctx: Context, tenant: Tenant, stack: str
) -> None:
    # A run's own lock (or one its dead executor left) is Terraform's business, not a person's.
    await _lock(ctx, phase=Phase.PLAN)
    run_id = await start(ctx, tenant.token, tenant.org, stack, "plan")
    assert await _waiting_for(ctx, tenant, run_id) is None
    assert [c.run_id for c in await dispatch.claim_plans(ctx)] == [run_id]


async def test_an_approved_apply_waits_for_a_persons_lock_too(
    ctx: Context, tenant: Tenant, stack: str
) -> None:
    async with ctx.unit() as unit:
        await unit.session.execute(update(Stack).values(require_approval=False))
    run_id = await start(ctx, tenant.token, tenant.org, stack, "apply")
    assert await plan_run(ctx, OUTPUTS_ONLY) == {run_id: RunStatus.APPLY_QUEUED}
    await _lock(ctx)
    assert await dispatch.claim_applies(ctx) == []
    assert (await _waiting_for(ctx, tenant, run_id) or "").startswith("waiting for the state lock")
    await _unlock(ctx)
    assert [c.run_id for c in await dispatch.claim_applies(ctx)] == [run_id]


async def test_a_drift_run_plans_the_commit_of_the_last_successful_apply(
    ctx: Context, tenant: Tenant, stack: str
) -> None:
    applied = [await start(ctx, tenant.token, tenant.org, stack, "apply") for _ in range(2)]
    for number, run_id in enumerate(applied):
        async with ctx.unit() as unit:
            await unit.session.execute(
                update(Run)
                .where(Run.id == run_id)
                .values(
                    status=RunStatus.APPLIED.value,
                    commit_sha=f"{number}" * 40,
                    finished_at=datetime(2026, 12, 4, 10, number, tzinfo=UTC),
                )
            )
    drift_id = await start(ctx, tenant.token, tenant.org, stack, "drift")
    [launch] = await dispatch.claim_plans(ctx)
    spec = await phases.spec(ctx, launch.token)
    assert spec.commit_sha == "1" * 40
    assert spec.drift_base is not None and spec.drift_base.run_number == 2
    async with ctx.db.transaction() as session:
        assert await session.scalar(select(Run.drift_base_run_id).where(Run.id == drift_id)) == applied[1]


async def test_a_drift_run_with_no_apply_to_compare_with_fails_before_terraform(
    ctx: Context, tenant: Tenant, stack: str
) -> None:
    drift_id = await start(ctx, tenant.token, tenant.org, stack, "drift")
    [launch] = await dispatch.claim_plans(ctx)
    with pytest.raises(NoDriftBase, match="no successful apply yet"):
        await phases.spec(ctx, launch.token)
    assert await status_of(ctx, drift_id) == "failed"
    async with ctx.db.transaction() as session:
        error = await session.scalar(select(Run.error).where(Run.id == drift_id))
    assert error is not None and error.startswith("Stack 'net' has no successful apply yet")


# -- the APIs ------------------------------------------------------------------------------------

RUN_QUERY = """query($id: ID!) { organization(slug: "acme") { run(id: $id) {
  status waitingFor driftBaseRunId summary { outputs text }
  changes { summary { outputs text } outputs { name unit action before after sensitive } }
} } }"""


async def test_graphql_and_rest_show_output_changes_and_why_a_run_waits(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    applied = await start(ctx, tenant.token, tenant.org, stack, "apply")
    assert await plan_run(ctx, OUTPUTS_ONLY) == {applied: RunStatus.AWAITING_APPROVAL}
    await _lock(ctx)
    waiting = await start(ctx, tenant.token, tenant.org, stack, "plan")

    async def graphql(run_id: str) -> dict[str, Any]:
        response = await client.post(
            "/graphql", json={"query": RUN_QUERY, "variables": {"id": run_id}}, headers=tenant.headers
        )
        body = response.json()
        assert not body.get("errors"), body["errors"]
        return body["data"]["organization"]["run"]  # type: ignore[no-any-return]

    run = await graphql(applied)
    assert run["summary"] == {"outputs": 4, "text": "4 output changes"}
    assert run["waitingFor"] is None and run["driftBaseRunId"] is None
    assert run["changes"]["outputs"][2] == {
        "name": "password",
        "unit": ".",
        "action": "CREATE",
        "before": None,
        "after": "(sensitive)",
        "sensitive": True,
    }
    reason = (await graphql(waiting))["waitingFor"]
    # The date too unless the lock was taken today.
    assert reason.startswith("waiting for the state lock held by ada@example.com since ")
    assert reason.endswith("10:42 UTC")

    o = f"/api/v1/orgs/{tenant.org}"
    changes = (await client.get(f"{o}/runs/{applied}/changes", headers=tenant.headers)).json()
    assert changes["summary_text"] == "4 output changes"
    assert [(c["name"], c["after"]) for c in changes["outputs"]] == [
        ("gone", None),
        ("later", "(known after apply)"),
        ("password", "(sensitive)"),
        ("size", "large"),
    ]
    assert "hunter2-secret" not in json.dumps(changes)
    rest = (await client.get(f"{o}/runs/{waiting}", headers=tenant.headers)).json()
    assert rest["status"] == "queued" and rest["waiting_for"].startswith("waiting for the state lock held by")
    assert (await client.get(f"{o}/runs/{applied}", headers=tenant.headers)).json()["output_changes"] == 4
