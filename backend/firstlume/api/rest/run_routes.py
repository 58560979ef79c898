"""Runs: start, list, read, review changes, approve, discard, cancel, logs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from firstlume.api.rest.http import context_of, endpoint, json_body
from firstlume.api.rest.org_routes import org_request
from firstlume.api.rest.serializers import changes_json, runs_json
from firstlume.api.validation import command
from firstlume.db.models import ResourceChange, Run, RunStep
from firstlume.domain.errors import InvalidRequest
from firstlume.domain.runs import FINISHED
from firstlume.services import catalog, runs
from firstlume.services.commands import ApproveRun, CancelRun, Command, DiscardRun, StartRun
from firstlume.services.context import Actor, Context, Unit
from firstlume.services.logs import LogTail, follow_log, read_log


@endpoint
async def start_run(request: Request) -> Response:
    body = await json_body(request)
    async with org_request(request) as (unit, actor, org):
        stack = await catalog.stack_by_slug(unit.session, org, request.path_params["stack"])
        run = await runs.start_run(unit, actor, stack, command(StartRun, body))
        [payload] = await runs_json(unit.session, [run])
    return JSONResponse(payload, status_code=201)


@endpoint
async def list_stack_runs(request: Request) -> Response:
    limit = _int_param(request, "limit", 100, 1, 500)
    async with org_request(request) as (unit, _, org):
        stack = await catalog.stack_by_slug(unit.session, org, request.path_params["stack"])
        items = await runs.list_stack_runs(unit.session, stack, limit=limit)
        return JSONResponse({"runs": await runs_json(unit.session, items)})


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidRequest(f"'{name}' must be a whole number; got {raw!r}.", field=name) from None
    if not low <= value <= high:
        raise InvalidRequest(f"'{name}' must be between {low} and {high}.", field=name)
    return value


@endpoint
async def list_org_runs(request: Request) -> Response:
    active = request.query_params.get("active", "true").lower()
    if active not in ("true", "1"):
        raise InvalidRequest(
            "Only active runs can be listed here: use ?active=true, or a stack's runs.", field="active"
        )
    async with org_request(request) as (unit, _, org):
        items = await runs.list_active_runs(unit.session, org)
        return JSONResponse({"runs": await runs_json(unit.session, items)})


@endpoint
async def get_run(request: Request) -> Response:
    async with org_request(request) as (unit, _, org):
        run = await runs.run_in_org(unit.session, org, request.path_params["run"])
        [payload] = await runs_json(unit.session, [run])
        return JSONResponse(payload)


@endpoint
async def get_changes(request: Request) -> Response:
    async with org_request(request) as (unit, _, org):
        run = await runs.run_in_org(unit.session, org, request.path_params["run"])
        rows = list(
            await unit.session.scalars(
                select(ResourceChange)
                .where(ResourceChange.run_id == run.id)
                .order_by(ResourceChange.position)
            )
        )
        return JSONResponse(changes_json(run, rows))


C = TypeVar("C", bound=Command)


async def _act_on_run(
    request: Request, model: type[C], action: Callable[[Unit, Actor, Run, C], Awaitable[Run]]
) -> Run:
    """A decision on a run (approve, discard, cancel): the run's row is locked while it is taken."""
    body = await json_body(request)
    async with org_request(request) as (unit, actor, org):
        run = await runs.run_in_org(unit.session, org, request.path_params["run"], lock=True)
        return await action(unit, actor, run, command(model, body))


async def _reply(request: Request, run: Run) -> Response:
    async with context_of(request).db.transaction() as session:
        [payload] = await runs_json(session, [run])
    return JSONResponse(payload)


@endpoint
async def approve(request: Request) -> Response:
    return await _reply(request, await _act_on_run(request, ApproveRun, runs.approve_run))


@endpoint
async def discard(request: Request) -> Response:
    return await _reply(request, await _act_on_run(request, DiscardRun, runs.discard_run))


@endpoint
async def cancel(request: Request) -> Response:
    run = await _act_on_run(request, CancelRun, runs.cancel_run)
    launcher = getattr(request.app.state, "launcher", None)
    if launcher is not None:
        await launcher.cancel(run.id)
    return await _reply(request, run)


@endpoint
async def logs(request: Request) -> Response:
    step = request.query_params.get("step") or None
    follow = request.query_params.get("follow", "false").lower() in ("true", "1")
    async with org_request(request) as (unit, _, org):
        run = await runs.run_in_org(unit.session, org, request.path_params["run"])
        if (
            step is not None
            and await unit.session.scalar(
                select(RunStep.id).where(RunStep.run_id == run.id, RunStep.name == step)
            )
            is None
            and run.status in FINISHED
        ):
            raise InvalidRequest(f"This run has no step '{step}'.", field="step")
        if not follow:
            part = await read_log(unit.session, run.id, 0, step)
            return PlainTextResponse(part.text)
    return StreamingResponse(
        _follow_text(context_of(request), run.id, step), media_type="text/plain; charset=utf-8"
    )


async def _follow_text(ctx: Context, run_id: str, step: str | None) -> AsyncIterator[str]:
    async for part in follow_log(ctx, LogTail(ctx, run_id, step, 0)):
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
