"""Organization resources: stacks, folders, settings and variables."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.guard import need_of, remember_actor, stack_need_of
from firstlume.api.rest.http import bearer_token, check_query, context_of, endpoint, json_body
from firstlume.api.rest.serializers import folder_json, resolved_json, stack_json, stacks_json, variable_json
from firstlume.api.validation import command
from firstlume.domain.git import StackTrigger
from firstlume.services import accounts, catalog, inherited
from firstlume.services.access import folder_grants
from firstlume.services.access.roles import Role
from firstlume.services.commands import CreateFolder, CreateStack, PatchSettings, PutVariable
from firstlume.services.context import Actor, Unit
from firstlume.services.git.polling import set_baseline
from firstlume.services.reads import Session
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads import settings as setting_reads
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord
from firstlume.services.reads.settings import Scope, explicit_settings


@asynccontextmanager
async def org_request(request: Request) -> AsyncIterator[tuple[Unit, Actor, OrganizationRecord]]:
    """A unit of work for a change made in the organization of the path, by the caller."""
    async with context_of(request).unit() as unit:
        actor, org = await accounts.authenticate_in_org(
            unit.session, bearer_token(request), request.path_params["org"], need_of(request)
        )
        remember_actor(request, actor)
        yield unit, actor, org


@asynccontextmanager
async def stack_request(
    request: Request,
) -> AsyncIterator[tuple[Unit, Actor, OrganizationRecord, StackRecord]]:
    """`org_request` for a change to the stack of the path, found in the same statement."""
    async with context_of(request).unit() as unit:
        actor, org, stack = await accounts.authenticate_in_stack(
            unit.session,
            bearer_token(request),
            request.path_params["org"],
            request.path_params["stack"],
            need_of(request),
        )
        remember_actor(request, actor)
        needed = stack_need_of(request)
        if needed is not None and not Role(actor.role or "reader").allows(needed):
            await folder_grants.require_on_stack(unit.session, org.id, actor.user_id, stack.folder_id, needed)
        yield unit, actor, org, stack


@asynccontextmanager
async def org_read(request: Request, *query: str) -> AsyncIterator[tuple[Session, Actor, OrganizationRecord]]:
    """A read in the organization of the path, by the caller; `query` names the query parameters
    the route takes (any other is refused)."""
    check_query(request, query)
    async with context_of(request).db.read() as session:
        actor, org = await accounts.authenticate_in_org(
            session, bearer_token(request), request.path_params["org"], need_of(request)
        )
        remember_actor(request, actor)
        yield session, actor, org


async def _scope(session: Session, org: OrganizationRecord, request: Request) -> Scope:
    params = request.path_params
    if "stack" in params:
        return await catalog.stack_by_slug(session, org, params["stack"])
    if "folder" in params:
        return await catalog.folder_by_path(session, org, params["folder"].strip("/"))
    return org


@endpoint
async def list_orgs(request: Request) -> Response:
    check_query(request)
    async with context_of(request).db.read() as session:
        actor = await accounts.authenticate(session, bearer_token(request))
        remember_actor(request, actor)
        orgs = await accounts.orgs_of(session, actor)
        return JSONResponse({"organizations": [{"slug": o.slug, "name": o.name} for o in orgs]})


@endpoint
async def list_stacks(request: Request) -> Response:
    async with org_read(request) as (session, actor, org):
        [stacks] = await catalog_reads.stacks_of_orgs(session, [org.id])
        paths = await catalog_reads.folder_paths(session, stacks)
        roles = await folder_grants.viewer_roles(session, org.id, actor.user_id, stacks, paths)
        return JSONResponse({"stacks": stacks_json(stacks, paths, roles)})


@endpoint
async def create_stack(request: Request) -> Response:
    body = await json_body(request)
    ctx = context_of(request)
    async with org_request(request) as (unit, _, org):
        stack = await catalog.create_stack(unit.session, ctx.keyring, org, command(CreateStack, body))
        paths = await catalog_reads.folder_paths(unit.session, [stack])
    if stack.trigger != StackTrigger.MANUAL:
        # Only commits after the branch's head now start runs.
        await set_baseline(ctx, stack.id)
    return JSONResponse(stacks_json([stack], paths)[0], status_code=201)


@endpoint
async def get_stack(request: Request) -> Response:
    async with org_read(request) as (session, actor, org):
        stack = await catalog.stack_by_slug(session, org, request.path_params["stack"])
        paths = await catalog_reads.folder_paths(session, [stack])
        roles = await folder_grants.viewer_roles(session, org.id, actor.user_id, [stack], paths)
        return JSONResponse(stack_json(stack, paths.get(stack.folder_id or ""), roles.get(stack.id)))


@endpoint
async def list_folders(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        [folders] = await catalog_reads.folders_of_orgs(session, [org.id])
        return JSONResponse({"folders": [folder_json(f) for f in folders]})


@endpoint
async def create_folder(request: Request) -> Response:
    body = await json_body(request)
    async with org_request(request) as (unit, _, org):
        folder, created = await catalog.ensure_folder(unit.session, org, command(CreateFolder, body))
        payload = folder_json(folder)
    return JSONResponse(payload, status_code=201 if created else 200)


async def _settings_payload(session: Session, scope: Scope) -> dict[str, object]:
    [effective] = await setting_reads.effective_settings(session, [scope])
    return {"explicit": explicit_settings(scope), "effective": resolved_json(effective)}


@endpoint
async def get_settings(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        scope = await _scope(session, org, request)
        return JSONResponse(await _settings_payload(session, scope))


@endpoint
async def patch_settings(request: Request) -> Response:
    body = await json_body(request)
    async with org_request(request) as (unit, _, org):
        scope = await _scope(unit.session, org, request)
        scope = await inherited.patch_settings(unit.session, scope, command(PatchSettings, body))
        return JSONResponse(await _settings_payload(unit.session, scope))


@endpoint
async def list_variables(request: Request) -> Response:
    ctx = context_of(request)
    async with org_read(request) as (session, _, org):
        scope = await _scope(session, org, request)
        [variables] = await setting_reads.variables(session, [scope])
        return JSONResponse(
            {
                "variables": [
                    variable_json(v, None if v.sensitive else inherited.revealed_value(ctx.keyring, v))
                    for v in variables
                ]
            }
        )


@endpoint
async def put_variable(request: Request) -> Response:
    body = await json_body(request)
    ctx = context_of(request)
    async with org_request(request) as (unit, _, org):
        scope = await _scope(unit.session, org, request)
        put = command(PutVariable, body, name=request.path_params["name"])
        variable = await inherited.put_variable(unit.session, ctx.keyring, scope, put)
        value = None if variable.sensitive else inherited.revealed_value(ctx.keyring, variable)
        return JSONResponse(variable_json(variable, value))


@endpoint
async def delete_variable(request: Request) -> Response:
    async with org_request(request) as (unit, _, org):
        scope = await _scope(unit.session, org, request)
        await inherited.delete_variable(unit.session, scope, request.path_params["name"])
    return Response(status_code=204)


def _level_routes(prefix: str) -> list[Route]:
    return [
        Route(f"{prefix}/settings", get_settings, methods=["GET"]),
        Route(f"{prefix}/settings", patch_settings, methods=["PATCH"]),
        Route(f"{prefix}/variables", list_variables, methods=["GET"]),
        Route(f"{prefix}/variables/{{name}}", put_variable, methods=["PUT"]),
        Route(f"{prefix}/variables/{{name}}", delete_variable, methods=["DELETE"]),
    ]


O = "/api/v1/orgs/{org}"

routes = [
    Route("/api/v1/orgs", list_orgs, methods=["GET"]),
    Route(f"{O}/stacks", list_stacks, methods=["GET"]),
    Route(f"{O}/stacks", create_stack, methods=["POST"]),
    Route(f"{O}/stacks/{{stack}}", get_stack, methods=["GET"]),
    Route(f"{O}/folders", list_folders, methods=["GET"]),
    Route(f"{O}/folders", create_folder, methods=["POST"]),
    *_level_routes(O),
    *_level_routes(f"{O}/stacks/{{stack}}"),
    *_level_routes(f"{O}/folders/{{folder:path}}"),
]
