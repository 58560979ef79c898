"""The REST side of the permission table: every route is wrapped here, once, when the app is
built. The wrapper puts what the route needs (services/access/permissions.py) on the request,
where the authentication of the request (accounts.authenticate_in_org, through org_read,
org_request and the state routes) checks it in the same statement that finds the caller; a
route that is not in the table makes the app refuse to start."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from firstlume.api.disconnect import client_left
from firstlume.api.rest.http import Handler, context_of, note_storage_failure
from firstlume.services.access import tokens
from firstlume.services.access.permissions import FORCE_UNLOCK, REST, STACK_SCOPED_REST, Need
from firstlume.services.access.roles import Role
from firstlume.services.context import Actor
from firstlume.services.storage import storage_failure

log = logging.getLogger("firstlume.api")

NEED_KEY = "firstlume.need"
# What a stack-scoped route needs on its stack (permissions.py STACK_SCOPED_REST).
STACK_NEED_KEY = "firstlume.stack_need"
ACTOR_KEY = "firstlume.actor"


class UnlistedRoutes(RuntimeError):
    def __init__(self, names: Sequence[str]) -> None:
        super().__init__(
            "These routes are not in the permission table (services/access/permissions.py REST): "
            + ", ".join(sorted(names))
        )


def route_names(routes: Sequence[BaseRoute]) -> list[str]:
    return [r.name for r in routes if isinstance(r, Route | WebSocketRoute)]


def unlisted(routes: Sequence[BaseRoute]) -> list[str]:
    return sorted({name for name in route_names(routes) if name not in REST})


def guard(routes: Sequence[BaseRoute]) -> list[BaseRoute]:
    missing = unlisted(routes)
    if missing:
        raise UnlistedRoutes(missing)
    guarded: list[BaseRoute] = []
    for route in routes:
        if isinstance(route, Route) and _is_handler(route):
            methods = sorted((route.methods or set()) - {"HEAD"}) or None
            guarded.append(
                Route(
                    route.path,
                    _wrap(route.endpoint, route.name, REST[route.name]),
                    methods=methods,
                    name=route.name,
                )
            )
        else:
            guarded.append(route)
    return guarded


def _is_handler(route: Route) -> bool:
    # A plain request handler; ASGI apps (GraphQL) check their own operations.
    return route.app is not route.endpoint


def _wrap(handler: Handler, name: str, need: Need) -> Handler:
    async def guarded(request: Request) -> Response:
        try:
            request.scope[NEED_KEY] = await _need(request, name, need)
            if name in STACK_SCOPED_REST and isinstance(need, Role):
                # A member with a folder grant may do here what their organization role may not.
                request.scope[NEED_KEY], request.scope[STACK_NEED_KEY] = Role.READER, need
        except ClientDisconnect:
            return client_left(request)
        response = await handler(request)
        actor: Actor | None = request.scope.get(ACTOR_KEY)
        # Recorded for requests that succeeded: a refused one changes nothing, not even this.
        if actor is not None and response.status_code < 400:
            await _touch(request, actor)
        return response

    guarded.__name__ = getattr(handler, "__name__", name)
    return guarded


async def _touch(request: Request, actor: Actor) -> None:
    """Records the token's use, at best: the answer is ready, and a read served while the
    database cannot store anything (a full disk) is still answered."""
    try:
        await tokens.touch_if_stale(context_of(request), actor)
    except Exception as error:
        storage = storage_failure(error)
        if storage is None:
            log.exception("recording the use of token %s failed", actor.token_id)
            return
        note_storage_failure(request, storage)
        log.warning("the use of token %s was not recorded: %s", actor.token_id, storage.message)


async def _need(request: Request, name: str, need: Need) -> Need:
    # `terraform force-unlock` sends an UNLOCK without a body: it releases anybody's lock.
    if name == "state.unlock" and not (await request.body()).strip():
        return FORCE_UNLOCK
    return need


def need_of(request: Request) -> Need:
    """What the route needs; a route the guard did not wrap fails closed."""
    need: Need | None = request.scope.get(NEED_KEY)
    if need is None:
        raise RuntimeError(f"{request.url.path} was not guarded by the permission table")
    return need


def stack_need_of(request: Request) -> Role | None:
    """What a stack-scoped route needs on its stack; None for the other routes."""
    need: Role | None = request.scope.get(STACK_NEED_KEY)
    return need


def remember_actor(request: Request, actor: Actor | None) -> None:
    request.scope[ACTOR_KEY] = actor
