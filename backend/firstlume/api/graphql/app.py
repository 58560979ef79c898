"""/graphql over HTTP and WebSocket (graphql-transport-ws), authenticated by the API tokens of
the REST API: the Authorization header, or the connection_init payload on a WebSocket."""

from __future__ import annotations

from typing import overload

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types.unset import UNSET, UnsetType

from firstlume.api.graphql.context import GraphQLContext
from firstlume.api.graphql.schema import schema
from firstlume.domain.audit import AuditVia
from firstlume.services.audit import entered_via
from firstlume.services.reads import ReadScope

# Where an HTTP request's read scope waits to be closed once its response is ready.
READS_KEY = "firstlume.reads"


class FirstlumeGraphQL(GraphQL[GraphQLContext, None]):
    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> GraphQLContext:
        context = GraphQLContext(app=request.app.state.ctx, connection=request, response=response)
        if not isinstance(request, WebSocket):
            context.reads = request.scope[READS_KEY] = ReadScope(context.app.db)
            await context.authenticate(request.headers.get("authorization"))
        return context

    @overload
    async def run(
        self, request: Request, context: GraphQLContext = UNSET, root_value: None = UNSET
    ) -> Response: ...

    @overload
    async def run(
        self, request: WebSocket, context: GraphQLContext = UNSET, root_value: None = UNSET
    ) -> WebSocket: ...

    async def run(
        self, request: Request | WebSocket, context: GraphQLContext = UNSET, root_value: None = UNSET
    ) -> Response | WebSocket:
        """Runs the operation, then closes the request's read scope (a WebSocket has none)."""
        entered_via(AuditVia.GRAPHQL, request.headers.get("x-request-id"))
        try:
            return await super().run(request, context, root_value)
        finally:
            reads = request.scope.pop(READS_KEY, None)
            if reads is not None:
                await reads.close()

    async def on_ws_connect(self, context: GraphQLContext) -> UnsetType | dict[str, object] | None:
        params = context.connection_params if isinstance(context.connection_params, dict) else {}
        authorization = (
            params.get("authorization")
            or params.get("Authorization")
            or context.connection.headers.get("authorization")
        )
        await context.authenticate(authorization)
        if context.actor is None:
            raise ConnectionRejectionError({"code": "unauthenticated", "message": context.auth_error})
        accepted: UnsetType = UNSET  # strawberry types the UNSET singleton as Any
        return accepted


def graphql_routes() -> list[BaseRoute]:
    endpoint = FirstlumeGraphQL(schema, subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL])
    return [
        Route("/graphql", endpoint, methods=["GET", "POST"], name="graphql"),
        WebSocketRoute("/graphql", endpoint, name="graphql.ws"),
    ]
