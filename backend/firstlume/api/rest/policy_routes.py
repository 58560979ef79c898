"""Policies as code (adoption-api.md section 8): an organization's Rego modules, and a test of one
against an input or a past run. Changes are the admins'; a module that does not compile is
refused with 422 `policy_compile_error`, its line and column in the body."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import context_of, endpoint, json_body
from firstlume.api.rest.org_routes import org_read, org_request
from firstlume.api.rest.serializers import iso
from firstlume.api.validation import command
from firstlume.services.commands import CreatePolicy, TryPolicy, UpdatePolicy
from firstlume.services.policies import authoring, store
from firstlume.services.policies.store import PolicyRecord

O = "/api/v1/orgs/{org}"


def policy_json(policy: PolicyRecord) -> dict[str, Any]:
    return {
        "name": policy.name,
        "kind": policy.kind.value,
        "description": policy.description,
        "rego": policy.rego,
        "created_at": iso(policy.created_at),
        "updated_at": iso(policy.updated_at),
    }


@endpoint
async def list_policies(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        return JSONResponse(
            {"policies": [policy_json(p) for p in await store.list_policies(session, org.id)]}
        )


@endpoint
async def create_policy(request: Request) -> Response:
    body = await json_body(request)
    async with org_request(request) as (unit, _, org):
        created = await store.create_policy(unit.session, org.id, command(CreatePolicy, body))
    return JSONResponse(policy_json(created), status_code=201)


@endpoint
async def get_policy(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        return JSONResponse(policy_json(await store.get_policy(session, org.id, request.path_params["name"])))


@endpoint
async def update_policy(request: Request) -> Response:
    body = await json_body(request)
    async with org_request(request) as (unit, _, org):
        updated = await store.update_policy(
            unit.session, org.id, request.path_params["name"], command(UpdatePolicy, body)
        )
    return JSONResponse(policy_json(updated))


@endpoint
async def delete_policy(request: Request) -> Response:
    async with org_request(request) as (unit, _, org):
        await store.delete_policy(unit.session, org.id, request.path_params["name"])
    return Response(status_code=204)


@endpoint
async def test_policy(request: Request) -> Response:
    body = await json_body(request)
    ctx = context_of(request)
    async with org_read(request) as (_, _, org):
        org_id = org.id
    result = await authoring.try_policy(
        ctx, org_id, request.path_params["name"], command(TryPolicy, body), ctx.settings.policy_time_limit
    )
    return JSONResponse(result)


routes = [
    Route(f"{O}/policies", list_policies, name="policies.list", methods=["GET"]),
    Route(f"{O}/policies", create_policy, name="policies.create", methods=["POST"]),
    Route(f"{O}/policies/{{name}}", get_policy, name="policies.get", methods=["GET"]),
    Route(f"{O}/policies/{{name}}", update_policy, name="policies.update", methods=["PUT"]),
    Route(f"{O}/policies/{{name}}", delete_policy, name="policies.delete", methods=["DELETE"]),
    Route(f"{O}/policies/{{name}}/test", test_policy, name="policies.test", methods=["POST"]),
]
