"""The executor protocol refuses what it must and is idempotent where retries happen."""

from __future__ import annotations

import json

import httpx
import pytest
from sqlalchemy import select, update

from conftest import Tenant, make_stack
from firstlume.db.models import PlanArtifact, Run, RunStep
from firstlume.launchers.base import PhaseLaunch
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.runs import start
from support.snapshot import snapshot
from support.statements import StatementCounter

E = "/api/v1/executor"


@pytest.fixture
async def phases(ctx: Context, tenant: Tenant) -> list[PhaseLaunch]:
    """Plan phases of two runs on two stacks, claimed as the scheduler would."""
    for slug in ("one", "two"):
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
        await start(ctx, tenant.token, tenant.org, slug, "apply")
    launches = await dispatch.claim_plans(ctx)
    assert len(launches) == 2
    return launches


def bearer(launch: PhaseLaunch) -> dict[str, str]:
    return {"Authorization": f"Bearer {launch.token}"}


async def log_of(client: httpx.AsyncClient, tenant: Tenant, run_id: str, step: str | None = None) -> str:
    params = {"step": step} if step else {}
    return (
        await client.get(
            f"/api/v1/orgs/{tenant.org}/runs/{run_id}/logs", headers=tenant.headers, params=params
        )
    ).text


async def test_spec_names_the_run_and_its_stack(client: httpx.AsyncClient, phases: list[PhaseLaunch]) -> None:
    spec = (await client.get(f"{E}/spec", headers=bearer(phases[0]))).json()
    assert (spec["run_id"], spec["phase"], spec["attempt"], spec["run_type"]) == (
        phases[0].run_id,
        "plan",
        1,
        "apply",
    )
    assert spec["stack"]["slug"] == phases[0].stack_slug and spec["commit_sha"] is None
    assert spec["log_offset"] == 0


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer flx_forged"}, {"Authorization": "token abc"}]
)
async def test_wrong_or_missing_token_is_refused(
    client: httpx.AsyncClient, phases: list[PhaseLaunch], ctx: Context, headers: dict[str, str]
) -> None:
    before = await snapshot(ctx)
    for method, path, body in [
        ("GET", "/spec", None),
        ("POST", "/logs", {"offset": 0, "step": "plan", "text": "x\n"}),
    ]:
        response = await client.request(
            method, E + path, headers=headers, content=json.dumps(body) if body else None
        )
        assert response.status_code == 401 and response.json()["error"]["code"] == "unauthenticated"
    assert await snapshot(ctx) == before


async def test_a_token_acts_on_its_own_run_only(
    client: httpx.AsyncClient, phases: list[PhaseLaunch], tenant: Tenant
) -> None:
    one, two = phases
    body = {"offset": 0, "step": "plan", "text": "only for run one\n"}
    assert (await client.post(f"{E}/logs", headers=bearer(one), content=json.dumps(body))).status_code == 200
    assert await log_of(client, tenant, one.run_id) == "only for run one\n"
    assert await log_of(client, tenant, two.run_id) == ""


async def test_token_dies_with_its_phase(
    client: httpx.AsyncClient, phases: list[PhaseLaunch], ctx: Context
) -> None:
    one = phases[0]
    finished = await client.post(
        f"{E}/finish", headers=bearer(one), content='{"status": "failed", "error": "boom"}'
    )
    assert finished.status_code == 200 and finished.json()["status"] == "failed"
    before = await snapshot(ctx)
    for path in ("/heartbeat", "/finish", "/logs"):
        response = await client.post(E + path, headers=bearer(one), content='{"status": "succeeded"}')
        assert response.status_code == 401
    assert await snapshot(ctx) == before


async def test_steps_out_of_order_are_refused_and_repeats_are_harmless(
    client: httpx.AsyncClient, phases: list[PhaseLaunch], tenant: Tenant
) -> None:
    h = bearer(phases[0])

    async def step(name: str, status: str) -> httpx.Response:
        return await client.post(
            f"{E}/steps", headers=h, content=json.dumps({"name": name, "status": status})
        )

    refused = await step("init", "done")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "step_out_of_order"
    assert (await step("checkout", "running")).status_code == 204
    assert (await step("checkout", "running")).status_code == 204  # a retried report
    assert (await step("checkout", "done")).status_code == 204
    assert (await step("checkout", "done")).status_code == 204
    again = await step("checkout", "running")
    assert again.status_code == 409 and "already ended" in again.json()["error"]["message"]
    bad = await step("checkout", "exploded")
    assert bad.status_code == 422
    run = (
        await client.get(f"/api/v1/orgs/{tenant.org}/runs/{phases[0].run_id}", headers=tenant.headers)
    ).json()
    assert [(s["name"], s["status"]) for s in run["steps"]] == [("checkout", "done")]


async def test_log_batches_are_idempotent_and_gaps_refused(
    client: httpx.AsyncClient, phases: list[PhaseLaunch], tenant: Tenant
) -> None:
    h = bearer(phases[0])

    async def send(offset: int, text: str, step: str = "plan") -> httpx.Response:
        return await client.post(
            f"{E}/logs", headers=h, content=json.dumps({"offset": offset, "step": step, "text": text})
        )

    first = await send(0, "line 1\nline 2\n")
    assert first.json() == {"next_offset": 14}
    duplicate = await send(0, "line 1\nline 2\n")  # the same batch, retried
    assert duplicate.status_code == 200 and duplicate.json() == {"next_offset": 14}
    overlapping = await send(7, "line 2\nline 3\n")  # a retry that also carries new text
    assert overlapping.json() == {"next_offset": 21}
    gap = await send(40, "line 9\n")
    assert gap.status_code == 409
    assert gap.json()["error"]["code"] == "log_gap" and gap.json()["error"]["expected_offset"] == 21
    assert (await send(21, "line 4\n", step="apply")).json() == {"next_offset": 28}
    assert await log_of(client, tenant, phases[0].run_id) == "line 1\nline 2\nline 3\nline 4\n"
    assert await log_of(client, tenant, phases[0].run_id, "plan") == "line 1\nline 2\nline 3\n"
    assert await log_of(client, tenant, phases[0].run_id, "apply") == "line 4\n"
    for bad in (
        {"offset": -1, "step": "plan", "text": "x"},
        {"offset": "0", "step": "plan", "text": "x"},
        {"offset": 0},
    ):
        response = await client.post(f"{E}/logs", headers=h, content=json.dumps(bad))
        assert response.status_code == 422
    assert await log_of(client, tenant, phases[0].run_id) == "line 1\nline 2\nline 3\nline 4\n"


async def test_plan_phase_cannot_use_apply_endpoints_or_upload_twice(
    client: httpx.AsyncClient, phases: list[PhaseLaunch]
) -> None:
    h = bearer(phases[0])
    assert (await client.get(f"{E}/plan", headers=h)).status_code == 409
    resources = await client.post(f"{E}/resources", headers=h, content='{"updates": []}')
    assert resources.status_code == 409
    plan = {
        "plan_file_b64": "cGxhbg==",
        "plan_json": {"format_version": "1.2", "resource_changes": []},
        "variables": [],
    }
    assert (await client.post(f"{E}/plan", headers=h, content=json.dumps(plan))).status_code == 200
    again = await client.post(f"{E}/plan", headers=h, content=json.dumps(plan))
    assert again.status_code == 409
    not_b64 = await client.post(
        f"{E}/plan", headers=bearer(phases[1]), content=json.dumps({**plan, "plan_file_b64": "%%%"})
    )
    assert not_b64.status_code == 422
    not_a_plan = await client.post(
        f"{E}/plan",
        headers=bearer(phases[1]),
        content=json.dumps({**plan, "plan_json": {"resource_changes": [{"x": 1}]}}),
    )
    assert not_a_plan.status_code == 422 and "not a Terraform plan" in not_a_plan.json()["error"]["message"]


async def test_a_plan_refused_while_its_changes_are_worked_out_leaves_nothing_behind(
    client: httpx.AsyncClient, phases: list[PhaseLaunch], ctx: Context
) -> None:
    # The sealed plan is written while the changes are worked out; a plan found malformed then
    # is refused with a 422 and its transaction takes the sealed plan with it.
    h = bearer(phases[0])
    plan = {"plan_file_b64": "cGxhbg==", "plan_json": {"format_version": "1.2"}, "variables": []}
    malformed = {**plan, "plan_json": {"format_version": "1.2", "resource_changes": [5]}}
    refused = await client.post(f"{E}/plan", headers=h, content=json.dumps(malformed))
    assert refused.status_code == 422, refused.text
    assert "not a Terraform plan" in refused.json()["error"]["message"]
    async with ctx.db.read() as session:
        assert await session.get(PlanArtifact, phases[0].run_id) is None
        run = await session.get(Run, phases[0].run_id)
        assert run is not None and not run.has_plan
    one_change = {"format_version": "1.2", "resource_changes": [{
        "address": "terraform_data.a", "mode": "managed", "type": "terraform_data", "name": "a",
        "change": {"actions": ["create"], "before": None, "after": {"input": "a"}, "after_unknown": {}},
    }]}  # fmt: skip
    stored = await client.post(f"{E}/plan", headers=h, content=json.dumps({**plan, "plan_json": one_change}))
    assert stored.status_code == 200 and stored.json()["summary"]["create"] == 1


async def test_finish_without_a_plan_fails_the_run_clearly(
    client: httpx.AsyncClient, phases: list[PhaseLaunch], tenant: Tenant
) -> None:
    response = await client.post(f"{E}/finish", headers=bearer(phases[0]), content='{"status": "succeeded"}')
    assert response.json()["status"] == "failed"
    run = (
        await client.get(f"/api/v1/orgs/{tenant.org}/runs/{phases[0].run_id}", headers=tenant.headers)
    ).json()
    assert run["error"] == "The plan phase ended without uploading a plan."


async def test_finish_ends_the_phases_last_step_with_the_result(
    client: httpx.AsyncClient, phases: list[PhaseLaunch], tenant: Tenant
) -> None:
    async def steps_of(run_id: str) -> list[tuple[str, str]]:
        run = (await client.get(f"/api/v1/orgs/{tenant.org}/runs/{run_id}", headers=tenant.headers)).json()
        return [(s["name"], s["status"]) for s in run["steps"]]

    plan = {"plan_file_b64": "cGxhbg==", "plan_json": {"format_version": "1.2"}, "variables": []}
    ok, broken = bearer(phases[0]), bearer(phases[1])
    for h in (ok, broken):
        assert (
            await client.post(f"{E}/steps", headers=h, json={"name": "plan", "status": "running"})
        ).status_code == 204
        assert (await client.post(f"{E}/plan", headers=h, content=json.dumps(plan))).status_code == 200

    # A step that is not running cannot end with the phase: refused, and the run has not moved.
    wrong = await client.post(f"{E}/finish", headers=ok, json={"status": "succeeded", "last_step": "apply"})
    assert wrong.status_code == 409 and wrong.json()["error"]["code"] == "step_out_of_order"
    assert ("plan", "running") in await steps_of(phases[0].run_id)
    run = (
        await client.get(f"/api/v1/orgs/{tenant.org}/runs/{phases[0].run_id}", headers=tenant.headers)
    ).json()
    assert run["status"] == "planning"

    done = await client.post(f"{E}/finish", headers=ok, json={"status": "succeeded", "last_step": "plan"})
    assert done.status_code == 200 and done.json()["status"] == "no_changes"
    assert ("plan", "done") in await steps_of(phases[0].run_id)
    failed = await client.post(
        f"{E}/finish", headers=broken, json={"status": "failed", "error": "boom", "last_step": "plan"}
    )
    assert failed.status_code == 200 and failed.json()["status"] == "failed"
    assert ("plan", "failed") in await steps_of(phases[1].run_id)


async def test_finish_stores_the_logs_last_text_before_the_result_or_nothing_at_a_gap(
    client: httpx.AsyncClient, phases: list[PhaseLaunch], tenant: Tenant, ctx: Context
) -> None:
    plan = {"plan_file_b64": "cGxhbg==", "plan_json": {"format_version": "1.2"}, "variables": []}
    h = bearer(phases[0])
    assert (
        await client.post(f"{E}/steps", headers=h, json={"name": "plan", "status": "running"})
    ).status_code == 204
    shipped = {"offset": 0, "step": "plan", "text": "Terraform planned.\n"}
    assert (await client.post(f"{E}/logs", headers=h, json=shipped)).json() == {"next_offset": 19}
    assert (await client.post(f"{E}/plan", headers=h, content=json.dumps(plan))).status_code == 200

    # Text that would leave a gap in the log: refused as POST /logs refuses it, nothing recorded.
    before = await snapshot(ctx)
    gap = {"status": "succeeded", "last_step": "plan", "log": {"offset": 25, "step": "plan", "text": "x\n"}}
    refused = await client.post(f"{E}/finish", headers=h, json=gap)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "log_gap" and refused.json()["error"]["expected_offset"] == 19
    assert await snapshot(ctx) == before

    last = {"offset": 19, "step": "plan", "text": "Plan recorded: no changes\n"}
    done = await client.post(
        f"{E}/finish", headers=h, json={"status": "succeeded", "last_step": "plan", "log": last}
    )
    assert done.status_code == 200 and done.json()["status"] == "no_changes"
    assert (
        await log_of(client, tenant, phases[0].run_id, "plan")
        == "Terraform planned.\nPlan recorded: no changes\n"
    )


OK_UPDATE = {"address": "terraform_data.a", "state": "done"}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/resources", {"updates": [OK_UPDATE, OK_UPDATE, OK_UPDATE, {"address": "b", "state": "exploded"}]}, "updates[3].state"),
        ("/resources", {"updates": [{**OK_UPDATE, "stages": [{"action": "delete", "state": "nope"}]}]}, "updates[0].stages[0].state"),
        ("/resources", {"updates": [OK_UPDATE] * 5001}, "updates"),
        ("/resources", {"updates": [], "extra": 1}, "extra"),
        ("/steps", {"name": "plan", "status": "exploded"}, "status"),
        ("/steps", {"name": "plan", "status": "pending"}, "status"),
        ("/logs", {"offset": "0", "step": "plan", "text": "x"}, "offset"),
        ("/logs", {"offset": 0, "step": "plan"}, "text"),
        ("/finish", {"status": "done"}, "status"),
        ("/commit", {"sha": 5, "author": "a", "message": "m"}, "sha"),
        ("/configuration", {"engine": "pulumi", "variables": []}, "engine"),
        ("/configuration", {"engine": "terraform", "variables": [{"name": "a", "origin": 7, "value": "leak"}]}, "variables[0].origin"),
        ("/state-backends", {"backends": [{"unit": "."}]}, "backends[0].backend"),
        ("/plan", {"plan_file_b64": "%%%", "plan_json": {}}, "plan_file_b64"),
        ("/plan", {"plan_file_b64": "cGxhbg==", "plan_json": []}, "plan_json"),
    ],
)  # fmt: skip
async def test_malformed_report_is_refused_naming_the_field_and_changes_nothing(
    client: httpx.AsyncClient, phases: list[PhaseLaunch], ctx: Context, path: str, body: dict, field: str
) -> None:
    before = await snapshot(ctx)

    response = await client.post(E + path, headers=bearer(phases[0]), content=json.dumps(body))

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["field"] == field
    assert f"'{field}'" in error["message"]
    assert "leak" not in response.text  # the offending value is not echoed: it may be a secret
    assert await snapshot(ctx) == before


async def test_a_dead_token_gets_401_whatever_it_sends(
    client: httpx.AsyncClient, phases: list[PhaseLaunch]
) -> None:
    response = await client.post(
        f"{E}/resources", headers={"Authorization": "Bearer fl_dead"}, content='{"updates": "x"}'
    )

    assert response.status_code == 401


async def test_the_apply_reads_its_plan_without_the_plans_json(
    ctx: Context,
    client: httpx.AsyncClient,
    tenant: Tenant,
    phases: list[PhaseLaunch],
    app_statements: StatementCounter,
) -> None:
    # The plan's JSON is kept with it but nothing on a run's path reads it back: the apply's spec
    # and its plan download would carry megabytes of a large plan's JSON for nothing.
    plan = {"format_version": "1.2", "resource_changes": []}
    body = {
        "plan_file_b64": "cGxhbg==",
        "plan_json": plan,
        "variables": [{"name": "region", "value": "eu", "origin": "stack"}],
    }
    assert (await client.post(f"{E}/plan", headers=bearer(phases[0]), json=body)).status_code == 200
    async with ctx.unit() as unit:  # as if approved: the apply is claimed next
        await unit.session.execute(
            update(Run).where(Run.id == phases[0].run_id).values(status="apply_queued", has_plan=True)
        )
    [apply] = await dispatch.claim_applies(ctx)
    with app_statements.counting() as statements:
        spec = await client.get(f"{E}/spec", headers=bearer(apply))
        download = await client.get(f"{E}/plan", headers=bearer(apply))
    assert spec.status_code == download.status_code == 200, (spec.text, download.text)
    assert [v["value"] for v in spec.json()["variables"]] == ["eu"]
    assert download.json()["plan_file_b64"] == "cGxhbg=="
    assert any("plan_artifacts" in s for s in statements)
    assert not [s for s in statements if "plan_json_sealed" in s]


async def test_a_step_report_reads_its_step_once(
    ctx: Context, client: httpx.AsyncClient, phases: list[PhaseLaunch], app_statements: StatementCounter
) -> None:
    # Every step's start and end is a report (or goes with the phase's result): the step read
    # to check the report's order is the one moved, not read a second time.
    for status in ("running", "done"):
        with app_statements.counting() as statements:
            response = await client.post(
                f"{E}/steps", headers=bearer(phases[0]), json={"name": "checkout", "status": status}
            )
        assert response.status_code == 204, response.text
        assert len([s for s in statements if "SELECT run_steps.id" in s]) == 1, statements
    async with ctx.db.read() as session:
        step = await session.scalar(select(RunStep).where(RunStep.run_id == phases[0].run_id))
    assert step is not None and (step.name, step.status) == ("checkout", "done")
    assert step.started_at is not None and step.finished_at is not None
