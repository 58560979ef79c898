"""The executor's requests (docs/executor-protocol.md), one use case each: the REST routes
(api/rest/executor_routes.py) only map HTTP onto these, and their answers back.

Each request authenticates its phase token and locks its run's row, in one transaction, so that
the reports of one phase apply one after another. A report's body (`body`: the request's JSON
object, awaited once the use case is ready for it) is read before the run is locked, validated
once the token is known to be good (a dead token gets its 401 whatever it sent), and refused
with a 422 before anything is written. What each report records is services/execution.py's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from firstlume import metrics
from firstlume.collector import young_collections_deferred
from firstlume.db.models import PhaseToken, Run
from firstlume.domain.dependencies import MissingUpstreamOutput
from firstlume.domain.errors import Conflict, FirstlumeError, InvalidRequest, NotFound
from firstlume.domain.runs import APPLY_STEP, Phase, RunStatus, RunType, StepStatus, TriggerKind
from firstlume.protocol import executor as protocol
from firstlume.services import dispatch, execution, steps
from firstlume.services.cli import configuration_versions
from firstlume.services.context import Context, Unit
from firstlume.services.drift.baseline import NoDriftBase
from firstlume.services.policies.evaluation import PlanEndPolicies, plan_end_policies
from firstlume.services.state import serials

Report = TypeVar("Report", bound=protocol.Request)
Body = Awaitable[dict[str, Any]]


def parse(body: dict[str, Any], model: type[Report]) -> Report:
    """`body` as `model`, or a 422 naming the first field that is wrong."""
    try:
        return model.model_validate(body)
    except ValidationError as error:
        field, message = protocol.describe(error)
        raise InvalidRequest(message + ".", field=field) from None


@asynccontextmanager
async def _phase(ctx: Context, token: str | None) -> AsyncIterator[tuple[Unit, Run, PhaseToken]]:
    async with ctx.unit() as unit:
        run, phase = await execution.authenticate_phase(unit.session, token, lock=True)
        yield unit, run, phase


@asynccontextmanager
async def _report(
    ctx: Context, token: str | None, body: Body, model: type[Report]
) -> AsyncIterator[tuple[Unit, Run, PhaseToken, Report]]:
    received = await body
    async with _phase(ctx, token) as (unit, run, phase):
        yield unit, run, phase, parse(received, model)


async def spec(ctx: Context, token: str | None) -> protocol.PhaseSpec:
    """What the phase needs to run. Asking for it is the executor's first sign of life: its first
        heartbeat. An apply whose managed state moved since its plan fails here, before Terraform
        starts (serials.StateMoved, once the failure is committed); so does a drift run with no
    successful apply to compare with (NoDriftBase), and a plan that reads an output its upstream
    stack does not have (MissingUpstreamOutput)."""
    refusal: Conflict
    async with _phase(ctx, token) as (unit, run, phase):
        moved = (
            await serials.state_moved_since_plan(unit.session, run) if phase.phase == Phase.APPLY else None
        )
        if moved is None:
            await execution.heartbeat(unit.session, run)
            try:
                return await execution.phase_spec(ctx, unit.session, run, phase)
            except (NoDriftBase, MissingUpstreamOutput) as error:
                # A drift run with no apply to compare with, or a plan that reads an output its
                # upstream stack does not have, ends here, before Terraform starts.
                refusal = error
        else:
            # The apply step fails with the run: the run's page shows where it stopped (the
            # apply, before Terraform started), not a plan that succeeded and nothing after it.
            await steps.set_step(unit, run, APPLY_STEP, StepStatus.FAILED)
            refusal = serials.StateMoved(moved)
        await execution.fail_run(unit, run, refusal.message, actor="firstlume")
    raise refusal


async def heartbeat(ctx: Context, token: str | None) -> None:
    async with _phase(ctx, token) as (unit, run, _):
        await execution.heartbeat(unit.session, run)


async def record_commit(ctx: Context, token: str | None, body: Body) -> None:
    async with _report(ctx, token, body, protocol.CommitReport) as (unit, run, phase, report):
        await execution.record_commit(unit, run, phase, report)


async def record_configuration(ctx: Context, token: str | None, body: Body) -> None:
    async with _report(ctx, token, body, protocol.ConfigurationReport) as (unit, run, phase, report):
        await execution.record_configuration(unit, run, phase, report)


async def record_step(ctx: Context, token: str | None, body: Body) -> None:
    async with _report(ctx, token, body, protocol.StepReport) as (unit, run, _, report):
        await execution.record_step(unit, run, report)


async def append_log(ctx: Context, token: str | None, body: Body) -> protocol.LogAccepted:
    async with _report(ctx, token, body, protocol.LogBatch) as (unit, run, _, batch):
        return protocol.LogAccepted(next_offset=await execution.append_log(unit, run, batch))


async def record_state_backends(ctx: Context, token: str | None, body: Body) -> None:
    async with _report(ctx, token, body, protocol.StateBackendsReport) as (unit, run, _, report):
        await execution.record_state_backends(unit, run, report)


async def record_reports(ctx: Context, token: str | None, body: Body) -> None:
    async with _report(ctx, token, body, protocol.ReportBatch) as (unit, run, phase, batch):
        await execution.record_reports(unit, run, phase, batch)


async def upload_plan(ctx: Context, token: str | None, body: Body) -> protocol.PlanRecorded:
    # The plan is read, and it and its changes are freed as _store_plan returns, while young
    # collections are held off: they are then not walked at all (collector.py).
    with young_collections_deferred():
        return await _store_plan(ctx, token, body)


async def _store_plan(ctx: Context, token: str | None, body: Body) -> protocol.PlanRecorded:
    async with _report(ctx, token, body, protocol.PlanUpload) as (unit, run, phase, upload):
        return await execution.store_plan(ctx, unit, run, phase, upload)


async def download_plan(ctx: Context, token: str | None) -> protocol.PlanDownload:
    async with _phase(ctx, token) as (unit, run, phase):
        return await execution.load_plan(ctx, unit.session, run, phase)


async def download_configuration(ctx: Context, token: str | None) -> bytes:
    """A CLI run's uploaded code (its configuration version), for either phase."""
    async with _phase(ctx, token) as (unit, run, _):
        if run.trigger_kind != TriggerKind.CLI or not run.trigger_delivery:
            raise NotFound("This run checks out its stack's repository: it has no uploaded configuration.")
        return await configuration_versions.archive(unit.session, ctx.keyring, run.trigger_delivery)


async def record_resources(ctx: Context, token: str | None, body: Body) -> None:
    async with _report(ctx, token, body, protocol.ResourceReports) as (unit, run, phase, report):
        await execution.record_resources(unit, run, phase, report)


async def _given(received: dict[str, Any]) -> dict[str, Any]:
    return received


async def _policies_at_plan_end(
    ctx: Context, token: str | None, received: dict[str, Any]
) -> PlanEndPolicies | None:
    """The run's policy checks when this report ends a successful plan (drift runs have none),
    evaluated before the run's row is locked: a slow policy holds no lock and no transaction.
    Anything wrong with the token or the report is left to the locked request to refuse."""
    if received.get("status") != protocol.PhaseResult.SUCCEEDED.value:
        return None
    try:
        async with ctx.db.read() as session:
            run, phase = await execution.authenticate_phase(session, token)
            if phase.phase != Phase.PLAN or run.type == RunType.DRIFT or not run.has_plan:
                return None
            run_id = run.id
    except FirstlumeError:
        return None
    return await plan_end_policies(ctx, run_id, ctx.settings.policy_time_limit)


async def finish(ctx: Context, token: str | None, body: Body) -> protocol.FinishAnswer:
    """The phase's result. A plan whose apply needs no approval hands over to it here: its apply
    is claimed in the same transaction, and this process's scheduler launches it once that has
    committed (dispatch.hand_over_apply), with no scheduler pass in between."""
    received = await body
    policies = await _policies_at_plan_end(ctx, token, received)
    async with _report(ctx, token, _given(received), protocol.FinishReport) as (unit, run, phase, report):
        run = await execution.finish_phase(unit, run, phase, report, policies)
        status = RunStatus(run.status)
        if status == RunStatus.APPLY_QUEUED and await dispatch.hand_over_apply(ctx, unit, run.id):
            status = RunStatus.APPLYING
        metrics.PHASE_DURATION.labels(phase=str(phase.phase), result=str(report.status)).observe(
            (datetime.now(UTC) - phase.created_at).total_seconds()
        )
    return protocol.FinishAnswer(status=status)
