"""The GraphQL side of the permission table (services/access/permissions.py GRAPHQL): a field
extension put on every listed field when the schema is built (`guard_fields`), which checks the
caller's role in the field's organization (its `org` argument, or the organization of the object
it is a field of) before the resolver runs. On a WebSocket, the token is checked again at every
operation, and an open subscription ends within seconds of its token's revocation or expiry."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from graphql import OperationType
from starlette.websockets import WebSocket
from strawberry.extensions import FieldExtension, SchemaExtension
from strawberry.types import Info
from strawberry.types.base import StrawberryObjectDefinition
from strawberry.types.field import StrawberryField

from firstlume.api.graphql.context import GraphQLContext
from firstlume.api.graphql.errors import as_error_type
from firstlume.domain.errors import NotFound, Unauthenticated
from firstlume.services.access import folder_grants
from firstlume.services.access.members import role_in
from firstlume.services.access.permissions import GRAPHQL, STACK_SCOPED_GRAPHQL, Need
from firstlume.services.access.roles import Role, check_role
from firstlume.services.access.tokens import token_usable
from firstlume.services.context import Actor

# How often an open subscription checks that its token is still valid: well within the 5 s a
# revoked token's subscriptions have to end.
REVOKED = "The API token was revoked or has expired."


class Unlisted(RuntimeError):
    pass


def graphql_name(field: StrawberryField) -> str:
    if field.graphql_name:
        return field.graphql_name
    head, *rest = (field.python_name or "").split("_")
    return head + "".join(part.title() for part in rest)


def field_keys(types: list[type]) -> dict[str, StrawberryField]:
    keys = {}
    for cls in types:
        definition: StrawberryObjectDefinition = cls.__strawberry_definition__  # type: ignore[attr-defined]
        for field in definition.fields:
            keys[f"{definition.name}.{graphql_name(field)}"] = field
    return keys


def guard_fields(roots: list[type], nested: list[type]) -> None:
    """Puts the check on every root field (each must be in the table) and on the listed nested ones."""
    root_fields = field_keys(roots)
    missing = sorted(set(root_fields) - set(GRAPHQL))
    if missing:
        raise Unlisted("GraphQL fields missing from the permission table: " + ", ".join(missing))
    for key, field in {**root_fields, **field_keys(nested)}.items():
        if key in GRAPHQL and not any(isinstance(e, RoleCheck) for e in field.extensions):
            field.extensions.append(RoleCheck(key, GRAPHQL[key]))


def _org_id_of(source: Any) -> str | None:
    # An Organization says its own id; other types hold a row or stack of one.
    own = getattr(source, "permission_org_id", None)
    if own is not None:
        return str(own)
    for attribute in ("row", "stack"):
        value = getattr(source, attribute, None)
        if value is not None and hasattr(value, "org_id"):
            return str(value.org_id)
    return None


async def _membership(ctx: GraphQLContext, actor: Actor, slug: str | None, org_id: str | None) -> str:
    async with ctx.loaders().reads.session() as session:
        # A WebSocket authenticated once, when it opened: its token is checked again each time.
        if isinstance(ctx.connection, WebSocket) and actor.token_id:
            if not await token_usable(session, actor.token_id):
                raise Unauthenticated(REVOKED)
        role = await role_in(session, actor.user_id, slug=slug, org_id=org_id)
    if role is None:
        raise NotFound(f"No organization '{slug}'." if slug else "No such organization.")
    return role


class TokenStillValid(SchemaExtension):
    """A WebSocket authenticates once, when it opens, and may stay open for hours: each operation
    on it checks its token again, so a revoked or expired token's next operation is refused."""

    async def on_operation(self) -> AsyncIterator[None]:
        ctx = self.execution_context.context
        actor = getattr(ctx, "actor", None)
        if isinstance(getattr(ctx, "connection", None), WebSocket) and actor is not None and actor.token_id:
            ctx.storage_error = None  # the connection's context outlives each operation
            try:
                async with ctx.loaders().reads.session() as session:
                    usable = await token_usable(session, actor.token_id)
            except Exception as error:
                ctx.keep_storage_failure(error)
            else:
                if not usable:
                    ctx.actor, ctx.auth_error = None, REVOKED
        yield


class RoleCheck(FieldExtension):
    def __init__(self, key: str, need: Need) -> None:
        super().__init__()
        self.key = key
        self.need = need

    def resolve(self, next_: Callable[..., Any], source: Any, info: Info, **kwargs: Any) -> Any:
        # Synchronous fields are the signed-in ones (the viewer, the organization lists).
        if isinstance(self.need, Role):
            raise Unlisted(f"{self.key} needs a role but is synchronous: make it async")
        info.context.require_actor()
        return next_(source, info, **kwargs)

    async def resolve_async(
        self, next_: Callable[..., Awaitable[Any]], source: Any, info: Info, **kwargs: Any
    ) -> Any:
        if info.operation.operation == OperationType.SUBSCRIPTION:
            # Checked when the stream is first read: a refusal is the stream's first message, like
            # the resolvers' own refusals.
            return self._stream(next_, source, info, kwargs)
        refusal = await self._check(source, info, kwargs)
        if refusal is not None:
            return refusal
        result = next_(source, info, **kwargs)
        return await result if inspect.isawaitable(result) else result

    async def _stream(
        self, next_: Callable[..., Any], source: Any, info: Info, kwargs: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        await self._check(source, info, kwargs)
        result = next_(source, info, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        async for item in until_revoked(info.context, info.context.require_actor(), result):
            yield item

    async def _check(self, source: Any, info: Info, kwargs: dict[str, Any]) -> Any:
        """None when the caller may; a mutation's NotFoundError for outsiders; raises otherwise."""
        ctx: GraphQLContext = info.context
        actor = ctx.require_actor()
        if isinstance(self.need, Role):
            slug = kwargs.get("org") if "org" in kwargs else None
            org_id = None if slug is not None else _org_id_of(source)
            if slug is None and org_id is None:
                raise Unlisted(f"{self.key}: no organization to check the role in")
            try:
                role = await _membership(ctx, actor, slug, org_id)
                if self.key in STACK_SCOPED_GRAPHQL and slug is not None and not Role(role).allows(self.need):
                    # A folder grant may raise the caller's role on this stack.
                    async with ctx.loaders().reads.session() as session:
                        await folder_grants.require_in_org(
                            session,
                            slug,
                            actor.user_id,
                            self.need,
                            stack_slug=kwargs.get("stack"),
                            run_id=str(kwargs["run_id"]) if "run_id" in kwargs else None,
                        )
                else:
                    check_role(role, self.need)
            except NotFound as error:
                if not self.key.startswith("Mutation."):
                    raise
                # Every mutation's result has NotFoundError: outsiders get it as data, as before.
                return as_error_type(error)
        elif isinstance(ctx.connection, WebSocket) and actor.token_id:
            async with ctx.loaders().reads.session() as session:
                if not await token_usable(session, actor.token_id):
                    raise Unauthenticated(REVOKED)
        return None


async def until_revoked(
    ctx: GraphQLContext, actor: Actor, events: AsyncIterator[Any]
) -> AsyncGenerator[Any, None]:
    """The subscription's events, until its token is revoked or expires: then an error ends it.
    The process's one token watch tells (services/access/token_watch.py), not a query each, and
    it cancels the wait for the next event: racing each event against the revocation cost a
    task and an `asyncio.wait` per subscriber per event (500 log readers: a fifth of a line's
    time)."""
    if actor.token_id is None:
        async for item in events:
            yield item
        return
    waiting: asyncio.Task[Any] | None = None  # the task awaiting the next event, if any

    def on_revoked() -> None:
        if waiting is not None:
            waiting.cancel()

    try:
        async with ctx.app.token_watch.watching(actor.token_id, on_revoked) as revoked:
            while True:
                if revoked.is_set():
                    raise Unauthenticated(REVOKED)
                waiting = asyncio.current_task()
                try:
                    item = await anext(events)
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    if revoked.is_set() and waiting is not None and waiting.uncancel() == 0:
                        raise Unauthenticated(REVOKED) from None
                    raise
                finally:
                    waiting = None
                yield item
    finally:
        closer = getattr(events, "aclose", None)
        if closer is not None:
            await closer()
