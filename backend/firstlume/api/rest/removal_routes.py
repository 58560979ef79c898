"""Deleting stacks, moving and deleting folders, and the deleted stacks kept for the retention
period (admins): services/removal.py. A stack's rename, move and credentials are its PATCH
(api/rest/git_routes.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import bool_param, check_query, context_of, endpoint, int_param, json_body
from firstlume.api.rest.org_routes import org_read, org_request
from firstlume.api.rest.serializers import folder_json, iso, run_json
from firstlume.api.rest.state_routes import DEFAULT_VERSIONS, version_json
from firstlume.api.validation import command
from firstlume.domain.state import normalize_unit
from firstlume.services import catalog, removal
from firstlume.services.commands import DeleteStack, MoveFolder
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads import state as state_reads
from firstlume.services.reads.catalog import DeletedStackRecord
from firstlume.services.reads.runs import RunPageKey
from firstlume.services.state import store

MAX_RUNS = 100


@endpoint
async def delete_stack(request: Request) -> Response:
    check_query(request, ["force"])
    force = bool_param(request, "force", False)
    async with org_request(request) as (unit, actor, org):
        await removal.delete_stack(
            unit, actor, org, request.path_params["stack"], command(DeleteStack, {"force": force})
        )
    return Response(status_code=204)


@endpoint
async def update_folder(request: Request) -> Response:
    body = await json_body(request)
    async with org_request(request) as (unit, _, org):
        check_query(request)
        folder = await catalog.move_folder(
            unit.session, org, request.path_params["folder"], command(MoveFolder, body)
        )
        payload = folder_json(folder)
    return JSONResponse(payload)


@endpoint
async def delete_folder(request: Request) -> Response:
    check_query(request)
    async with org_request(request) as (unit, _, org):
        await removal.delete_folder(unit.session, org, request.path_params["folder"])
    return Response(status_code=204)


def deleted_stack_json(stack: DeletedStackRecord, retention_days: float) -> dict[str, Any]:
    return {
        "id": stack.id,
        "slug": stack.deleted_slug,
        "name": stack.name,
        "repository": stack.repository,
        "branch": stack.branch,
        "path": stack.path,
        "created_at": iso(stack.created_at),
        "deleted_at": iso(stack.deleted_at),
        "deleted_by": stack.deleted_by,
        "purge_after": iso(stack.deleted_at + timedelta(days=retention_days)),
    }


@endpoint
async def list_deleted_stacks(request: Request) -> Response:
    retention = context_of(request).settings.deleted_stack_retention_days
    async with org_read(request) as (session, _, org):
        found = await catalog_reads.deleted_stacks(session, org.id)
    return JSONResponse({"stacks": [deleted_stack_json(s, retention) for s in found]})


@endpoint
async def get_deleted_stack(request: Request) -> Response:
    retention = context_of(request).settings.deleted_stack_retention_days
    async with org_read(request) as (session, _, org):
        found, _ = await removal.deleted_stack(session, org.id, request.path_params["id"])
    return JSONResponse(deleted_stack_json(found, retention))


@endpoint
async def list_deleted_stack_runs(request: Request) -> Response:
    async with org_read(request, "limit", "before") as (session, _, org):
        limit = int_param(request, "limit", MAX_RUNS, 1, MAX_RUNS) or MAX_RUNS
        before = int_param(request, "before", None, 1, 2**31 - 1)
        found, stack = await removal.deleted_stack(session, org.id, request.path_params["id"])
        [items] = await run_reads.stack_runs(session, [RunPageKey(stack.id, limit, before)])
        details = await run_reads.details(session, items, slugs={stack.id: found.deleted_slug or stack.slug})
        return JSONResponse({"runs": [run_json(d) for d in details]})


@endpoint
async def list_deleted_stack_versions(request: Request) -> Response:
    async with org_read(request, "unit", "limit", "before") as (session, _, org):
        unit = normalize_unit(request.query_params.get("unit", "."))
        limit = int_param(request, "limit", DEFAULT_VERSIONS, 1, state_reads.MAX_VERSIONS) or 1
        before = int_param(request, "before", None, 0, 2**62)
        _, stack = await removal.deleted_stack(session, org.id, request.path_params["id"])
        head = await state_reads.head_of(session, stack.id, unit)
        records = await state_reads.versions(session, head.id, limit=limit, before=before) if head else []
        return JSONResponse({"versions": [version_json(r) for r in records]})


@endpoint
async def read_deleted_stack_version(request: Request) -> Response:
    keyring = context_of(request).keyring
    async with org_read(request, "unit") as (session, _, org):
        unit = normalize_unit(request.query_params.get("unit", "."))
        _, stack = await removal.deleted_stack(session, org.id, request.path_params["id"])
        raw = await store.version_state(session, keyring, stack, unit, request.path_params["serial"])
    return Response(raw, media_type="application/json")


O = "/api/v1/orgs/{org}"
D = f"{O}/deleted-stacks/{{id}}"

# After org_routes: a folder's own settings and variables routes come first.
routes = [
    Route(f"{O}/stacks/{{stack}}", delete_stack, name="stacks.delete", methods=["DELETE"]),
    Route(f"{O}/folders/{{folder:path}}", update_folder, name="folders.update", methods=["PATCH"]),
    Route(f"{O}/folders/{{folder:path}}", delete_folder, name="folders.delete", methods=["DELETE"]),
    Route(f"{O}/deleted-stacks", list_deleted_stacks, name="deleted_stacks.list", methods=["GET"]),
    Route(D, get_deleted_stack, name="deleted_stacks.get", methods=["GET"]),
    Route(f"{D}/runs", list_deleted_stack_runs, name="deleted_stacks.runs", methods=["GET"]),
    Route(
        f"{D}/state/versions",
        list_deleted_stack_versions,
        name="deleted_stacks.state_versions",
        methods=["GET"],
    ),
    Route(
        f"{D}/state/versions/{{serial:int}}",
        read_deleted_stack_version,
        name="deleted_stacks.state_version",
        methods=["GET"],
    ),
]
