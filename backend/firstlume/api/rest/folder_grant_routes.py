"""Roles per folder (adoption-api.md section 10): a folder's grants, with the origins of those
that reach it from above."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import endpoint, json_body
from firstlume.api.rest.org_routes import org_read, org_request
from firstlume.services.access import folder_grants


@endpoint
async def get_folder_grants(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        answer = await folder_grants.get_grants(session, org, request.path_params["folder"])
    return JSONResponse(answer)


@endpoint
async def put_folder_grants(request: Request) -> Response:
    body = await json_body(request)
    async with org_request(request) as (unit, _, org):
        answer = await folder_grants.put_grants(unit.session, org, request.path_params["folder"], body)
    return JSONResponse(answer)


GRANTS = "/api/v1/orgs/{org}/folders/{folder:path}/grants"

routes = [
    Route(GRANTS, get_folder_grants, methods=["GET"], name="folder_grants.get"),
    Route(GRANTS, put_folder_grants, methods=["PUT"], name="folder_grants.put"),
]
