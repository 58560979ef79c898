"""The executor protocol (docs/executor-protocol.md): what executors report over HTTP."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume import metrics
from firstlume.api.rest.http import bearer_token, check_query, context_of, endpoint, json_body
from firstlume.collector import young_collections_deferred

# ORM rows in annotations until these routes call one use case each (issue 38, item 5).
from firstlume.db.models import PhaseToken, Run
from firstlume.domain.errors import InvalidRequest
from firstlume.domain.runs import Phase, RunStatus, is_running_phase
from firstlume.protocol import executor as protocol
from firstlume.pubsub import Subscription, run_channel
from firstlume.services import dispatch, execution, prepared
from firstlume.services.context import Unit
from firstlume.services.state import serials

Message = TypeVar("Message", bound=protocol.Request)

# A prepared apply waiting for its plan checks its run again this often, events or not.
RECHECK_SECONDS = 1.0


def parse(body: dict[str, Any], model: type[Message]) -> Message:
    """`body` as `model`, or a 422 naming the first field that is wrong."""
    try:
        return model.model_validate(body)
    except ValidationError as error:
        field, message = protocol.describe(error)
        raise InvalidRequest(message + ".", field=field) from None


def model_response(answer: BaseModel) -> Response:
    return Response(answer.model_dump_json(), media_type="application/json")


@asynccontextmanager
async def phase_request(
    request: Request, *, prepared: bool = False
) -> AsyncIterator[tuple[Unit, Run, PhaseToken]]:
    """`prepared`: a prepared apply's token is good too (its spec, its wait for the plan)."""
    async with context_of(request).unit() as unit:
        # The run row is locked so that reports of one phase apply one after another.
        run, token = await execution.authenticate_phase(
            unit.session, bearer_token(request), lock=True, prepared=prepared
        )
        yield unit, run, token


def _is_running(run: Run, token: PhaseToken) -> bool:
    return is_running_phase(run.status, run.phase_attempt, token.phase, token.attempt)


@asynccontextmanager
async def phase_report(
    request: Request, model: type[Message]
) -> AsyncIterator[tuple[Unit, Run, PhaseToken, Message]]:
    """A report: read before the run is locked, validated once the token is known to be good (a
    dead token gets its 401 whatever it sent), refused with a 422 before anything is written."""
    body = await json_body(request)
    async with phase_request(request) as (unit, run, token):
        yield unit, run, token, parse(body, model)


@endpoint
async def spec(request: Request) -> Response:
    check_query(request)
    async with phase_request(request, prepared=True) as (unit, run, token):
        if not _is_running(run, token):
            # A prepared apply: its plan runs, and its checks come when its apply begins.
            return model_response(
                await execution.phase_spec(context_of(request), unit.session, run, token, prepared=True)
            )
        # An apply whose managed state moved since its plan fails here, before Terraform starts.
        moved = (
            await serials.state_moved_since_plan(unit.session, run) if token.phase == Phase.APPLY else None
        )
        if moved is None:
            # Asking for its spec is the executor's first sign of life: its first heartbeat.
            await execution.heartbeat(unit.session, run)
            return model_response(await execution.phase_spec(context_of(request), unit.session, run, token))
        await execution.fail_run(unit, run, moved, actor="firstlume")
    raise serials.StateMoved(moved)


@endpoint
async def heartbeat(request: Request) -> Response:
    async with phase_request(request) as (unit, run, _):
        await execution.heartbeat(unit.session, run)
    return Response(status_code=204)


@endpoint
async def commit(request: Request) -> Response:
    async with phase_report(request, protocol.CommitReport) as (unit, run, token, report):
        await execution.record_commit(unit, run, token, report)
    return Response(status_code=204)


@endpoint
async def configuration(request: Request) -> Response:
    async with phase_report(request, protocol.ConfigurationReport) as (unit, run, token, report):
        await execution.record_configuration(unit, run, token, report)
    return Response(status_code=204)


@endpoint
async def steps(request: Request) -> Response:
    async with phase_report(request, protocol.StepReport) as (unit, run, _, report):
        await execution.record_step(unit, run, report)
    return Response(status_code=204)


@endpoint
async def logs(request: Request) -> Response:
    async with phase_report(request, protocol.LogBatch) as (unit, run, _, report):
        next_offset = await execution.append_log(unit, run, report)
    return model_response(protocol.LogAccepted(next_offset=next_offset))


@endpoint
async def state_backends(request: Request) -> Response:
    async with phase_report(request, protocol.StateBackendsReport) as (unit, run, _, report):
        await execution.record_state_backends(unit, run, report)
    return Response(status_code=204)


@endpoint
async def reports(request: Request) -> Response:
    launch: Callable[[], None] | None = None
    async with phase_report(request, protocol.ReportBatch) as (unit, run, token, batch):
        await execution.record_reports(unit, run, token, batch)
        launch = await prepared.prepare_apply(context_of(request), unit, run, token.phase, batch)
    if launch is not None:
        launch()
    return Response(status_code=204)


@endpoint
async def upload_plan(request: Request) -> Response:
    # The plan and its changes are freed as `_record_plan` returns, before collections resume:
    # they are then not walked at all (collector.py).
    with young_collections_deferred():
        result = await _record_plan(request)
    return model_response(result)


async def _record_plan(request: Request) -> protocol.PlanRecorded:
    async with phase_report(request, protocol.PlanUpload) as (unit, run, token, report):
        return await execution.store_plan(context_of(request), unit, run, token, report)


@endpoint
async def download_plan(request: Request) -> Response:
    """The plan of a running apply. A prepared apply's request (services/prepared.py) waits: the
    plan as soon as its apply is this token's phase; a 401 once the run went anywhere else (its
    token revoked, or its status past the apply); 204 after a while of neither, and the executor
    asks again. Every change of the run's status is published on its channel: subscribed first,
    then checked, nothing is missed; the check is repeated now and then all the same, should the
    broker lose an event. No database session is held while it waits."""
    check_query(request)
    ctx = context_of(request)
    deadline = time.monotonic() + prepared.WAIT_SECONDS
    async with AsyncExitStack() as waiting:
        events: Subscription | None = None
        while True:
            moved: str | None = None
            async with phase_request(request, prepared=True) as (unit, run, token):
                run_id = run.id
                if _is_running(run, token):
                    # As the spec does: an apply whose managed state moved since its plan fails
                    # before Terraform applies (a prepared apply's spec came before its plan ended).
                    moved = await serials.state_moved_since_plan(unit.session, run)
                    if moved is None:
                        return model_response(await execution.load_plan(ctx, unit.session, run, token))
                    await execution.fail_run(unit, run, moved, actor="firstlume")
            if moved is not None:
                raise serials.StateMoved(moved)  # once the failure is committed
            if events is None:
                events = await waiting.enter_async_context(ctx.pubsub.subscribe(run_channel(run_id)))
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Response(status_code=204)
            await events.next(min(remaining, RECHECK_SECONDS))


@endpoint
async def resources(request: Request) -> Response:
    async with phase_report(request, protocol.ResourceReports) as (unit, run, token, report):
        await execution.record_resources(unit, run, token, report)
    return Response(status_code=204)


@endpoint
async def finish(request: Request) -> Response:
    ctx = context_of(request)
    launch: Callable[[], None] | None = None
    async with phase_report(request, protocol.FinishReport) as (unit, run, token, report):
        run = await execution.finish_phase(unit, run, token, report)
        status = RunStatus(run.status)
        if status == RunStatus.APPLY_QUEUED:
            # Approval not required: the apply starts with the plan's result, not a pass later.
            launch = await dispatch.hand_over_apply(ctx, unit, run.id)
            if launch is not None:
                status = RunStatus.APPLYING
        metrics.PHASE_DURATION.labels(phase=str(token.phase), result=str(report.status)).observe(
            (datetime.now(UTC) - token.created_at).total_seconds()
        )
    if launch is not None:
        launch()
    return model_response(protocol.FinishAnswer(status=status))


E = "/api/v1/executor"

routes = [
    Route(f"{E}/spec", spec, methods=["GET"], name="executor.spec"),
    Route(f"{E}/heartbeat", heartbeat, methods=["POST"], name="executor.heartbeat"),
    Route(f"{E}/commit", commit, methods=["POST"], name="executor.commit"),
    Route(f"{E}/configuration", configuration, methods=["POST"], name="executor.configuration"),
    Route(f"{E}/steps", steps, methods=["POST"], name="executor.steps"),
    Route(f"{E}/logs", logs, methods=["POST"], name="executor.logs"),
    Route(f"{E}/state-backends", state_backends, methods=["POST"], name="executor.state_backends"),
    Route(f"{E}/reports", reports, methods=["POST"], name="executor.reports"),
    Route(f"{E}/plan", upload_plan, methods=["POST"], name="executor.upload_plan"),
    Route(f"{E}/plan", download_plan, methods=["GET"], name="executor.download_plan"),
    Route(f"{E}/resources", resources, methods=["POST"], name="executor.resources"),
    Route(f"{E}/finish", finish, methods=["POST"], name="executor.finish"),
]
