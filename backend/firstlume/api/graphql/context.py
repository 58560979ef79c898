"""Who is calling and with what: the request's context, shared by every resolver."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import HTTPConnection
from strawberry.extensions import SchemaExtension
from strawberry.types import Info

from firstlume.api.authorization import token_from
from firstlume.api.graphql.loaders import Loaders
from firstlume.api.graphql.org_root import OrgRoot, about_of
from firstlume.domain.errors import StorageUnavailable, Unauthenticated
from firstlume.services import accounts
from firstlume.services.context import Actor, Context
from firstlume.services.reads import ReadScope
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord
from firstlume.services.storage import storage_failure

MISSING_TOKEN = "Send an API token: 'Authorization: Bearer <token>'."


@dataclass
class GraphQLContext:
    """One per HTTP request, and one per WebSocket connection (shared by its operations)."""

    app: Context
    connection: HTTPConnection
    response: Any
    actor: Actor | None = None
    auth_error: str = MISSING_TOKEN
    # Why the caller could not be read at all (no database connection free, …): the first
    # resolver that needs an actor raises it, and the client is answered 503 in its words.
    storage_error: StorageUnavailable | None = None
    # Set by strawberry from the graphql-transport-ws connection_init payload.
    connection_params: dict[str, Any] = field(default_factory=dict)
    # One read session per HTTP request (closed by the endpoint when the response is ready); a
    # WebSocket connection reads per use instead, since it may stay open for hours.
    reads: ReadScope | None = None
    # An HTTP request's Authorization header, until its operation is known and AuthenticateCaller
    # reads it (then None); a WebSocket authenticates when it opens.
    authorization: str | None = None
    _loaders: Loaders | None = None
    # What the query is about, read with its caller: the organization (None when the caller is
    # not a member of one by that slug) and the stack it asks for (None when there is none).
    about: OrgRoot | None = None
    about_org: OrganizationRecord | None = None
    about_stack: StackRecord | None = None

    def loaders(self) -> Loaders:
        """The operation's loaders: shared by an HTTP request's root fields; new for each
        operation on a WebSocket, whose context outlives them."""
        if self.reads is None:
            return Loaders(self.app)
        if self._loaders is None:
            self._loaders = Loaders(self.app, self.reads)
        return self._loaders

    def require_actor(self) -> Actor:
        if self.storage_error is not None:
            raise self.storage_error
        if self.actor is None:
            raise Unauthenticated(self.auth_error)
        return self.actor

    async def authenticate(self, authorization: str | None, about: OrgRoot | None = None) -> None:
        """Reads `Bearer <token>`; on failure the reason is kept for the first resolver that needs
        an actor (HTTP) or for refusing the connection (WebSocket). With `about`, the organization
        and stack the query is about are read in the same statement."""
        self.actor, self.about, self.storage_error = None, None, None
        try:
            token = bearer_token(authorization)
        except Unauthenticated as error:
            self.auth_error = error.message
            return
        if token is None:
            self.auth_error = MISSING_TOKEN
            return
        reads = self.reads or ReadScope(self.app.db, shared=False)
        try:
            async with reads.session() as session:
                if about is None:
                    self.actor = await accounts.authenticate(session, token)
                else:
                    self.actor, self.about_org, self.about_stack = await accounts.authenticate_about(
                        session, token, about.org, about.stack
                    )
                    self.about = about
        except Unauthenticated as error:
            self.auth_error = error.message
        except Exception as error:
            self.keep_storage_failure(error)

    def keep_storage_failure(self, error: Exception) -> None:
        """Keeps a storage failure met in an extension for the first resolver that needs an actor:
        raised there, it would reach the client unmasked (HTTP: a 200; a WebSocket: an operation
        completed with no answer). Any other error is raised."""
        failure = storage_failure(error)
        if failure is None:
            raise error
        self.storage_error, self.auth_error = failure, failure.message

    def known_org(self, slug: str) -> tuple[OrganizationRecord | None, dict[str, StackRecord | None]] | None:
        """The organization `slug` (None: the caller is no member of one) and the stacks read with
        it, by slug, when they were read with the caller; None when they were not."""
        about = self.about
        if about is None or about.org != slug:
            return None
        stacks = {about.stack: self.about_stack} if about.stack is not None else {}
        return self.about_org, stacks


class AuthenticateCaller(SchemaExtension):
    """Authenticates an HTTP request's caller once its operation is parsed and validated: a query
    about one organization (org_root.py) then reads the caller, the organization and its stack in
    one statement. No resolver runs before this."""

    async def on_execute(self) -> AsyncIterator[None]:
        execution = self.execution_context
        context = execution.context
        if isinstance(context, GraphQLContext) and context.authorization is not None:
            authorization, context.authorization = context.authorization, None
            document = execution.graphql_document
            about = (
                about_of(document, execution.operation_name, execution.variables)
                if document is not None
                else None
            )
            await context.authenticate(authorization, about)
        yield


def bearer_token(authorization: Any) -> str | None:
    """`Bearer <token>`; None without one; Unauthenticated for a header with no usable token."""
    return token_from(authorization if isinstance(authorization, str) else None)


def context_of(info: Info[GraphQLContext, None]) -> GraphQLContext:
    return info.context
