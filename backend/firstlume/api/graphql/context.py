"""Who is calling and with what: the request's context, shared by every resolver."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import HTTPConnection
from strawberry.types import Info

from firstlume.api.graphql.loaders import Loaders
from firstlume.domain.errors import Unauthenticated
from firstlume.services import accounts
from firstlume.services.context import Actor, Context
from firstlume.services.reads import ReadScope

MISSING_TOKEN = "Send an API token: 'Authorization: Bearer <token>'."


@dataclass
class GraphQLContext:
    """One per HTTP request, and one per WebSocket connection (shared by its operations)."""

    app: Context
    connection: HTTPConnection
    response: Any
    actor: Actor | None = None
    auth_error: str = MISSING_TOKEN
    # Set by strawberry from the graphql-transport-ws connection_init payload.
    connection_params: dict[str, Any] = field(default_factory=dict)
    # One read session per HTTP request (closed by the endpoint when the response is ready); a
    # WebSocket connection reads per use instead, since it may stay open for hours.
    reads: ReadScope | None = None
    _loaders: Loaders | None = None

    def loaders(self) -> Loaders:
        """The operation's loaders: shared by an HTTP request's root fields; new for each
        operation on a WebSocket, whose context outlives them."""
        if self.reads is None:
            return Loaders(self.app)
        if self._loaders is None:
            self._loaders = Loaders(self.app, self.reads)
        return self._loaders

    def require_actor(self) -> Actor:
        if self.actor is None:
            raise Unauthenticated(self.auth_error)
        return self.actor

    async def authenticate(self, authorization: str | None) -> None:
        """Reads `Bearer <token>`; on failure the reason is kept for the first resolver that needs
        an actor (HTTP) or for refusing the connection (WebSocket)."""
        token = bearer_token(authorization)
        self.actor = None
        if token is None:
            self.auth_error = MISSING_TOKEN
            return
        reads = self.reads or ReadScope(self.app.db, shared=False)
        try:
            async with reads.session() as session:
                self.actor = await accounts.authenticate(session, token)
        except Unauthenticated as error:
            self.auth_error = error.message


def bearer_token(authorization: Any) -> str | None:
    if not isinstance(authorization, str):
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def context_of(info: Info[GraphQLContext, None]) -> GraphQLContext:
    return info.context
