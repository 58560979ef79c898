"""The executor protocol (docs/executor-protocol.md) over HTTP: each route calls its use case in
services/phases.py and answers with its result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.rest.http import bearer_token, check_query, context_of, endpoint, json_body
from firstlume.services import phases
from firstlume.services.context import Context
from firstlume.services.phases import Body


def model_response(answer: BaseModel) -> Response:
    return Response(answer.model_dump_json(), media_type="application/json")


def read(
    use_case: Callable[[Context, str | None], Awaitable[BaseModel]],
) -> Callable[[Request], Awaitable[Response]]:
    """A GET: its answer."""

    @endpoint
    async def route(request: Request) -> Response:
        check_query(request)
        return model_response(await use_case(context_of(request), bearer_token(request)))

    return route


@endpoint
async def heartbeat(request: Request) -> Response:
    await phases.heartbeat(context_of(request), bearer_token(request))
    return Response(status_code=204)


def report(
    use_case: Callable[[Context, str | None, Body], Awaitable[BaseModel | None]],
) -> Callable[[Request], Awaitable[Response]]:
    """A POST of a JSON body: its answer, or 204."""

    @endpoint
    async def route(request: Request) -> Response:
        answer = await use_case(context_of(request), bearer_token(request), json_body(request))
        return Response(status_code=204) if answer is None else model_response(answer)

    return route


@endpoint
async def download_configuration(request: Request) -> Response:
    check_query(request)
    archive = await phases.download_configuration(context_of(request), bearer_token(request))
    return Response(archive, media_type="application/gzip")


E = "/api/v1/executor"

routes = [
    Route(f"{E}/spec", read(phases.spec), methods=["GET"], name="executor.spec"),
    Route(f"{E}/heartbeat", heartbeat, methods=["POST"], name="executor.heartbeat"),
    Route(f"{E}/commit", report(phases.record_commit), methods=["POST"], name="executor.commit"),
    Route(
        f"{E}/configuration",
        report(phases.record_configuration),
        methods=["POST"],
        name="executor.configuration",
    ),
    Route(f"{E}/steps", report(phases.record_step), methods=["POST"], name="executor.steps"),
    Route(f"{E}/logs", report(phases.append_log), methods=["POST"], name="executor.logs"),
    Route(
        f"{E}/state-backends",
        report(phases.record_state_backends),
        methods=["POST"],
        name="executor.state_backends",
    ),
    Route(f"{E}/reports", report(phases.record_reports), methods=["POST"], name="executor.reports"),
    Route(f"{E}/plan", report(phases.upload_plan), methods=["POST"], name="executor.upload_plan"),
    Route(f"{E}/plan", read(phases.download_plan), methods=["GET"], name="executor.download_plan"),
    Route(
        f"{E}/configuration-version",
        download_configuration,
        methods=["GET"],
        name="executor.configuration_version",
    ),
    Route(f"{E}/resources", report(phases.record_resources), methods=["POST"], name="executor.resources"),
    Route(f"{E}/finish", report(phases.finish), methods=["POST"], name="executor.finish"),
]
