"""Members (roles and groups) and the caller's own API tokens (platform-api.md §5)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import endpoint, json_body
from firstlume.api.rest.org_routes import org_read, org_request
from firstlume.api.rest.serializers import iso
from firstlume.api.validation import command
from firstlume.services.access import members, tokens
from firstlume.services.access.commands import CreateToken, PutMember
from firstlume.services.access.tokens import TokenRecord


def token_json(row: TokenRecord) -> dict[str, object]:
    return {
        "id": row.id,
        "name": row.name,
        "created_at": iso(row.created_at),
        "last_used_at": iso(row.last_used_at) if row.last_used_at else None,
        "expires_at": iso(row.expires_at) if row.expires_at else None,
        "revoked_at": iso(row.revoked_at) if row.revoked_at else None,
    }


@endpoint
async def list_members(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        found = await members.list_members(session, org.id)
    return JSONResponse({"members": [members.member_json(m) for m in found]})


@endpoint
async def put_member(request: Request) -> Response:
    body = await json_body(request)
    async with org_request(request) as (unit, _, org):
        member = await members.put_member(
            unit.session, org, request.path_params["email"], command(PutMember, body)
        )
    return JSONResponse(members.member_json(member))


@endpoint
async def delete_member(request: Request) -> Response:
    async with org_request(request) as (unit, _, org):
        await members.remove_member(unit.session, org, request.path_params["email"])
    return Response(status_code=204)


@endpoint
async def list_tokens(request: Request) -> Response:
    async with org_read(request, "member") as (session, actor, org):
        member = request.query_params.get("member")
        rows = await tokens.list_tokens(session, actor, org, member[:320] if member is not None else None)
        return JSONResponse({"tokens": [token_json(r) for r in rows]})


@endpoint
async def create_token(request: Request) -> Response:
    body = await json_body(request)
    async with org_request(request) as (unit, actor, org):
        created = await tokens.create_token(unit.session, actor, command(CreateToken, body), org)
        answer = {**token_json(created.row), "token": created.token}
    return JSONResponse(answer, status_code=201)


@endpoint
async def revoke_token(request: Request) -> Response:
    async with org_request(request) as (unit, actor, org):
        row = await tokens.revoke_token(unit, actor, request.path_params["token"], org)
        answer = token_json(row)
    return JSONResponse(answer)


O = "/api/v1/orgs/{org}"

routes = [
    Route(f"{O}/members", list_members, methods=["GET"], name="members.list"),
    Route(f"{O}/members/{{email}}", put_member, methods=["PUT"], name="members.put"),
    Route(f"{O}/members/{{email}}", delete_member, methods=["DELETE"], name="members.delete"),
    Route(f"{O}/tokens", list_tokens, methods=["GET"], name="tokens.list"),
    Route(f"{O}/tokens", create_token, methods=["POST"], name="tokens.create"),
    Route(f"{O}/tokens/{{token}}", revoke_token, methods=["DELETE"], name="tokens.revoke"),
]
