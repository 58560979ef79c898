"""Runs: start, list, read, review changes, approve, discard, cancel, logs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.guard import stack_need_of
from firstlume.api.rest.http import bool_param, context_of, endpoint, int_param, json_body, query_values
from firstlume.api.rest.org_routes import org_read, org_request, stack_request
from firstlume.api.rest.serializers import changes_document, run_json
from firstlume.api.validation import command
from firstlume.domain.errors import InvalidRequest, NotFound
from firstlume.domain.runs import ACTIVE, FINISHED, RunStatus, RunType, TriggerKind
from firstlume.services import catalog, runs
from firstlume.services.access import folder_grants
from firstlume.services.access.roles import Role
from firstlume.services.commands import ApproveRun, CancelRun, Command, DiscardRun, StartRun
from firstlume.services.context import Actor, Unit
from firstlume.services.logs import follow_log, stream_log
from firstlume.services.reads import Session
from firstlume.services.reads import changes as change_reads
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads.catalog import OrganizationRecord
from firstlume.services.reads.runs import RunFilter, RunPageKey, RunRecord

MAX_LIST = 500
DEFAULT_LIST = 100


@endpoint
async def start_run(request: Request) -> Response:
    body = await json_body(request)
    async with stack_request(request) as (unit, actor, _, stack):
        run = await runs.start_run(unit, actor, stack, command(StartRun, body))
        [details] = await run_reads.details(
            unit.session,
            [run],
            slugs={stack.id: stack.slug},
            known_emails={actor.user_id: actor.email},
            known_positions=unit.queue_positions,
            just_queued=True,
        )
    return JSONResponse(run_json(details), status_code=201)


def _enum_values(
    request: Request, name: str, enum: type[RunStatus] | type[RunType] | type[TriggerKind]
) -> tuple[Any, ...]:
    values = query_values(request, name)
    try:
        return tuple(enum(v) for v in dict.fromkeys(values))
    except ValueError:
        bad = next(v for v in values if v not in {e.value for e in enum})
        allowed = ", ".join(e.value for e in enum)
        raise InvalidRequest(f"'{name}' must be one of {allowed}; got {bad!r}.", field=name) from None


def _run_filter(request: Request) -> RunFilter:
    return RunFilter(
        statuses=_enum_values(request, "status", RunStatus),
        types=_enum_values(request, "type", RunType),
        triggers=_enum_values(request, "trigger", TriggerKind),
    )


@endpoint
async def list_stack_runs(request: Request) -> Response:
    async with org_read(request, "status", "type", "trigger", "limit", "before") as (session, _, org):
        run_filter = _run_filter(request)
        limit = int_param(request, "limit", DEFAULT_LIST, 1, MAX_LIST)
        before = int_param(request, "before", None, 1, 2**31 - 1)
        assert limit is not None
        stack = await catalog.stack_by_slug(session, org, request.path_params["stack"])
        extras = run_reads.PageExtras()
        [items] = await run_reads.stack_runs(
            session, [RunPageKey(stack.id, limit, before, run_filter)], extras
        )
        details = await run_reads.details(
            session,
            items,
            slugs={stack.id: stack.slug},
            known_emails=extras.emails,
            known_positions=extras.positions,
        )
        return JSONResponse({"runs": [run_json(d) for d in details]})


@endpoint
async def list_org_runs(request: Request) -> Response:
    async with org_read(request, "active", "status", "type", "trigger") as (session, _, org):
        active = request.query_params.get("active", "true").lower()
        if active not in ("true", "1"):
            raise InvalidRequest(
                "Only active runs can be listed here: use ?active=true, or a stack's runs.", field="active"
            )
        run_filter = _run_filter(request)
        finished = [s.value for s in run_filter.statuses if s not in ACTIVE]
        if finished:
            raise InvalidRequest(
                f"Only active runs are listed here; '{finished[0]}' is a finished status: list a stack's runs.",
                field="status",
            )
        [items] = await run_reads.active_runs(session, [org.id], run_filter)
        details = await run_reads.details(session, items)
        return JSONResponse({"runs": [run_json(d) for d in details]})


async def _details_in_org(session: Session, org_id: str, run_id: str) -> run_reads.RunDetails:
    details = await run_reads.details_in_org(session, org_id, run_id)
    if details is None:
        raise NotFound(f"No run '{run_id}' in this organization.")
    return details


@endpoint
async def get_run(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        details = await _details_in_org(session, org.id, request.path_params["run"])
        return JSONResponse(run_json(details))


@endpoint
async def get_changes(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        run = await run_reads.run_in_org(session, org.id, request.path_params["run"])
        if run is None:
            raise NotFound(f"No run '{request.path_params['run']}' in this organization.")
        records = await change_reads.all_changes(session, run.id)
        [outputs] = await change_reads.output_changes(session, [run.id])
    return Response(changes_document(run, records, outputs), media_type="application/json")


C = TypeVar("C", bound=Command)


async def _act_on_run(
    request: Request,
    model: type[C],
    action: Callable[[Unit, Actor, OrganizationRecord, str, C], Awaitable[RunRecord]],
) -> RunRecord:
    """A decision on a run (approve, discard, cancel)."""
    body = await json_body(request)
    async with org_request(request) as (unit, actor, org):
        needed = stack_need_of(request)
        if needed is not None and not Role(actor.role or "reader").allows(needed):
            await folder_grants.require_on_run(
                unit.session, org.id, actor.user_id, request.path_params["run"], needed
            )
        return await action(unit, actor, org, request.path_params["run"], command(model, body))


async def _reply(request: Request, run: RunRecord) -> Response:
    async with context_of(request).db.read() as session:
        [details] = await run_reads.details(session, [run])
    return JSONResponse(run_json(details))


@endpoint
async def approve(request: Request) -> Response:
    return await _reply(request, await _act_on_run(request, ApproveRun, runs.approve_run))


@endpoint
async def discard(request: Request) -> Response:
    return await _reply(request, await _act_on_run(request, DiscardRun, runs.discard_run))


@endpoint
async def cancel(request: Request) -> Response:
    # The scheduler hears of the cancellation and has the launcher clean up after the run.
    run = await _act_on_run(request, CancelRun, runs.cancel_run)
    return await _reply(request, run)


@endpoint
async def logs(request: Request) -> Response:
    async with org_read(request, "step", "follow") as (session, _, org):
        step = request.query_params.get("step") or None
        follow = bool_param(request, "follow", False)
        run = await run_reads.run_in_org(session, org.id, request.path_params["run"])
        if run is None:
            raise NotFound(f"No run '{request.path_params['run']}' in this organization.")
        if step is not None and RunStatus(run.status) in FINISHED:
            [steps] = await run_reads.steps_of(session, [run.id])
            if step not in {s.name for s in steps}:
                raise InvalidRequest(f"This run has no step '{step}'.", field="step")
        length = run.log_length
    ctx = context_of(request)
    if follow:
        parts = follow_log(ctx, run.id, step, 0)
    else:
        # The log as it is now, however long: streamed page by page.
        parts = stream_log(ctx, run.id, step, 0, before=length)
    return StreamingResponse(_text(parts), media_type="text/plain; charset=utf-8")


async def _text(parts: AsyncIterator[Any]) -> AsyncIterator[str]:
    async for part in parts:
        yield part.text


R = "/api/v1/orgs/{org}/runs/{run}"

routes = [
    Route("/api/v1/orgs/{org}/stacks/{stack}/runs", start_run, methods=["POST"]),
    Route("/api/v1/orgs/{org}/stacks/{stack}/runs", list_stack_runs, methods=["GET"]),
    Route("/api/v1/orgs/{org}/runs", list_org_runs, methods=["GET"]),
    Route(R, get_run, methods=["GET"]),
    Route(f"{R}/changes", get_changes, methods=["GET"]),
    Route(f"{R}/logs", logs, methods=["GET"]),
    Route(f"{R}/approve", approve, methods=["POST"]),
    Route(f"{R}/discard", discard, methods=["POST"]),
    Route(f"{R}/cancel", cancel, methods=["POST"]),
]
