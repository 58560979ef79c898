"""The HCP Terraform API's HTTP conventions: JSON:API bodies, errors as JSON:API `errors` (the
CLI prints their title and detail) beside Firstlume's own `error`, and the caller authenticated
in the organization the path's id belongs to (another organization's id is a 404)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import wraps
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.guard import need_of, remember_actor
from firstlume.api.rest.http import bearer_token, context_of, endpoint
from firstlume.api.tfe.documents import JSONAPI
from firstlume.services import accounts
from firstlume.services.cli.lookups import Owner
from firstlume.services.context import Actor, Unit
from firstlume.services.reads import Session
from firstlume.services.reads.catalog import OrganizationRecord

Handler = Callable[[Request], Awaitable[Response]]


def document(body: dict[str, Any], status_code: int = 200) -> Response:
    return Response(json.dumps(body), status_code=status_code, media_type=JSONAPI)


def tfe_endpoint(handler: Handler) -> Handler:
    """`endpoint`'s error handling, with the errors also in JSON:API's shape."""
    handled = endpoint(handler)

    @wraps(handler)
    async def wrapped(request: Request) -> Response:
        response = await handled(request)
        if response.status_code < 400 or not isinstance(response, JSONResponse):
            return response
        try:
            body = json.loads(bytes(response.body))
        except ValueError:
            return response
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            return response
        body["errors"] = [
            {
                "status": str(response.status_code),
                "code": error.get("code"),
                "title": error.get("code", "error").replace("_", " "),
                "detail": error.get("message"),
            }
        ]
        headers = {
            k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-type")
        }
        return Response(
            json.dumps(body), status_code=response.status_code, media_type=JSONAPI, headers=headers
        )

    return wrapped


async def authenticated_in(
    session: Session, request: Request, org_slug: str
) -> tuple[Actor, OrganizationRecord]:
    actor, org = await accounts.authenticate_in_org(
        session, bearer_token(request), org_slug, need_of(request)
    )
    remember_actor(request, actor)
    return actor, org


@asynccontextmanager
async def read_in(
    request: Request, find: Callable[[Session], Awaitable[Owner]]
) -> AsyncIterator[tuple[Session, Actor, OrganizationRecord, Owner]]:
    """A read about the thing `find` names, by a caller of its organization."""
    async with context_of(request).db.read() as session:
        await accounts.authenticate(session, bearer_token(request))
        owner = await find(session)
        actor, org = await authenticated_in(session, request, owner.org_slug)
        yield session, actor, org, owner


@asynccontextmanager
async def change_in(
    request: Request, find: Callable[[Session], Awaitable[Owner]]
) -> AsyncIterator[tuple[Unit, Actor, OrganizationRecord, Owner]]:
    """A change to the thing `find` names, by a caller of its organization."""
    async with context_of(request).unit() as unit:
        await accounts.authenticate(unit.session, bearer_token(request))
        owner = await find(unit.session)
        actor, org = await authenticated_in(unit.session, request, owner.org_slug)
        yield unit, actor, org, owner
