"""Drive runs through the real services the way an executor would, without launching one."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from firstlume.db.models import Run
from firstlume.domain.runs import RunType
from firstlume.protocol.executor import FinishReport, PlanUpload, ResourceReports
from firstlume.services import accounts, catalog, dispatch, execution, runs
from firstlume.services.commands import StartRun
from firstlume.services.context import Context

# A plan that creates one resource, as `show -json` prints it.
CREATE_ONE: dict[str, Any] = {
    "format_version": "1.2",
    "resource_changes": [
        {
            "address": "terraform_data.a",
            "mode": "managed",
            "type": "terraform_data",
            "name": "a",
            "change": {"actions": ["create"], "before": None, "after": {"input": "x"}, "after_unknown": {}},
        }
    ],
}


async def start(ctx: Context, token: str, org: str, stack: str, run_type: str) -> str:
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, token)
        org_row = await accounts.org_for(unit.session, actor, org)
        stack_row = await catalog.stack_by_slug(unit.session, org_row, stack)
        run = await runs.start_run(unit, actor, stack_row, StartRun(type=RunType(run_type)))
        return run.id


async def report(ctx: Context, phase_token: str, what: str, body: dict[str, Any] | None = None) -> Any:
    """One executor report through the same service the HTTP route calls, validated as it does."""
    async with ctx.unit() as unit:
        run, token = await execution.authenticate_phase(unit.session, phase_token, lock=True)
        if what == "plan":
            return await execution.store_plan(ctx, unit, run, token, PlanUpload.model_validate(body or {}))
        if what == "finish":
            report = FinishReport.model_validate(body or {})
            return (await execution.finish_phase(unit, run, token, report)).status
        if what == "resources":
            updates = ResourceReports.model_validate(body or {})
            return await execution.record_resources(unit, run, token, updates)
        raise ValueError(what)


async def plan_run(ctx: Context, plan_json: dict[str, Any]) -> dict[str, str]:
    """Claims every startable plan phase, uploads `plan_json` for each and finishes it.
    Returns run id → resulting status."""
    results = {}
    for launch in await dispatch.claim_plans(ctx):
        await report(
            ctx, launch.token, "plan", {"plan_file_b64": "cGxhbg==", "plan_json": plan_json, "variables": []}
        )
        results[launch.run_id] = await report(ctx, launch.token, "finish", {"status": "succeeded"})
    return results


async def status_of(ctx: Context, run_id: str) -> str:
    async with ctx.db.transaction() as session:
        status = await session.scalar(select(Run.status).where(Run.id == run_id))
        assert status is not None
        return status
