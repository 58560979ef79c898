"""The executor protocol (docs/executor-protocol.md): what executors report over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from firstlume.api.rest.http import bearer_token, context_of, endpoint, json_body
from firstlume.services import execution
from firstlume.services.context import Unit
from firstlume.services.reads import PhaseToken, Run


@asynccontextmanager
async def phase_request(request: Request) -> AsyncIterator[tuple[Unit, Run, PhaseToken]]:
    async with context_of(request).unit() as unit:
        # The run row is locked so that reports of one phase apply one after another.
        run, token = await execution.authenticate_phase(unit.session, bearer_token(request), lock=True)
        yield unit, run, token


@endpoint
async def spec(request: Request) -> Response:
    async with phase_request(request) as (unit, run, token):
        return JSONResponse(await execution.phase_spec(context_of(request), unit.session, run, token))


@endpoint
async def heartbeat(request: Request) -> Response:
    async with phase_request(request) as (unit, run, _):
        await execution.heartbeat(unit.session, run)
    return Response(status_code=204)


@endpoint
async def commit(request: Request) -> Response:
    body = await json_body(request)
    async with phase_request(request) as (unit, run, token):
        await execution.record_commit(unit, run, token, body)
    return Response(status_code=204)


@endpoint
async def configuration(request: Request) -> Response:
    body = await json_body(request)
    async with phase_request(request) as (unit, run, token):
        await execution.record_configuration(unit, run, token, body)
    return Response(status_code=204)


@endpoint
async def steps(request: Request) -> Response:
    body = await json_body(request)
    async with phase_request(request) as (unit, run, _):
        await execution.record_step(unit, run, body)
    return Response(status_code=204)


@endpoint
async def logs(request: Request) -> Response:
    body = await json_body(request)
    async with phase_request(request) as (unit, run, _):
        next_offset = await execution.append_log(unit, run, body)
    return JSONResponse({"next_offset": next_offset})


@endpoint
async def state_backends(request: Request) -> Response:
    body = await json_body(request)
    async with phase_request(request) as (unit, run, _):
        await execution.record_state_backends(unit, run, body)
    return Response(status_code=204)


@endpoint
async def upload_plan(request: Request) -> Response:
    body = await json_body(request)
    ctx = context_of(request)
    async with phase_request(request) as (unit, run, token):
        result = await execution.store_plan(ctx, unit, run, token, body)
    return JSONResponse(result)


@endpoint
async def download_plan(request: Request) -> Response:
    async with phase_request(request) as (unit, run, token):
        return JSONResponse(await execution.load_plan(context_of(request), unit.session, run, token))


@endpoint
async def resources(request: Request) -> Response:
    body = await json_body(request)
    async with phase_request(request) as (unit, run, token):
        await execution.record_resources(unit, run, token, body)
    return Response(status_code=204)


@endpoint
async def finish(request: Request) -> Response:
    body = await json_body(request)
    async with phase_request(request) as (unit, run, token):
        run = await execution.finish_phase(unit, run, token, body)
        status = run.status
    return JSONResponse({"status": status})


E = "/api/v1/executor"

routes = [
    Route(f"{E}/spec", spec, methods=["GET"]),
    Route(f"{E}/heartbeat", heartbeat, methods=["POST"]),
    Route(f"{E}/commit", commit, methods=["POST"]),
    Route(f"{E}/configuration", configuration, methods=["POST"]),
    Route(f"{E}/steps", steps, methods=["POST"]),
    Route(f"{E}/logs", logs, methods=["POST"]),
    Route(f"{E}/state-backends", state_backends, methods=["POST"]),
    Route(f"{E}/plan", upload_plan, methods=["POST"]),
    Route(f"{E}/plan", download_plan, methods=["GET"]),
    Route(f"{E}/resources", resources, methods=["POST"]),
    Route(f"{E}/finish", finish, methods=["POST"]),
]
