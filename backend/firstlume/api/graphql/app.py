"""/graphql over HTTP and WebSocket (graphql-transport-ws), authenticated by the API tokens of
the REST API: the Authorization header, or the connection_init payload on a WebSocket."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, overload

from cross_web import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http import GraphQLHTTPResponse
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import BaseGraphQLTransportWSHandler
from strawberry.types import ExecutionResult
from strawberry.types.unset import UNSET, UnsetType

from firstlume.api.disconnect import client_left
from firstlume.api.graphql.context import GraphQLContext
from firstlume.api.graphql.errors import storage_error_in
from firstlume.api.graphql.schema import schema
from firstlume.api.json_body import JSONResponse
from firstlume.domain import json_input, json_output
from firstlume.domain.audit import AuditVia
from firstlume.domain.errors import StorageUnavailable
from firstlume.services.audit import entered_via
from firstlume.services.reads import ReadScope
from firstlume.services.storage import retry_after_headers, storage_failure

# Where an HTTP request's read scope waits to be closed once its response is ready.
READS_KEY = "firstlume.reads"

log = logging.getLogger("firstlume.api.graphql")


def request_error(http_status: int, code: str, message: str) -> JSONResponse:
    """A request GraphQL cannot even start on, in the GraphQL-over-HTTP shape, with the same
    `code` in `extensions` as the REST API would give."""
    return JSONResponse(
        {"errors": [{"message": message, "extensions": {"code": code}}]}, status_code=http_status
    )


class QuietWhenClientLeaves(BaseGraphQLTransportWSHandler[GraphQLContext, None]):
    """A client that goes away while its subscription sends is no server error: the operation
    just ends, with nothing logged (strawberry would log a traceback for each)."""

    async def handle_task_exception(self, error: Exception) -> None:
        if isinstance(error, WebSocketDisconnected):
            return
        await super().handle_task_exception(error)

    def forget_id(self, id: str) -> None:
        # An operation that completes as its client leaves was already removed by the shutdown:
        # strawberry's `del` would then raise KeyError (and log it as a worker failure).
        self.operations.pop(id, None)


class FirstlumeGraphQL(GraphQL[GraphQLContext, None]):
    graphql_transport_ws_handler_class = QuietWhenClientLeaves

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        request = Request(scope=scope, receive=receive)
        if request.method == "POST" and not _json_type(request.headers.get("content-type", "")):
            request = Request(scope=_as_json(scope), receive=receive)
        response = await self._respond(request)
        await response(scope, receive, send)

    async def _respond(self, request: Request) -> Response:
        try:
            return await self.run(request)
        except HTTPException as error:
            code = "invalid_json" if error.status_code == 400 else "invalid_request"
            return request_error(error.status_code, code, _sentence(error.reason))
        except ClientDisconnect:
            return client_left(request)
        except Exception as error:
            storage = storage_failure(error)
            if storage is not None:
                log.error("%s /graphql: %s (%s)", request.method, storage.message, error)
                request.app.state.ctx.storage.failed(storage)
                response = request_error(storage.http_status, storage.code, storage.message)
                response.headers.update(retry_after_headers(storage))
                return response
            log.exception("unexpected error on %s /graphql", request.method)
            return request_error(
                500, "internal_error", "Something went wrong on our side; it has been logged."
            )

    def create_response(
        self, response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse], sub_response: Response
    ) -> Response:
        response = super().create_response(response_data, sub_response)
        if storage_error_in(response_data):
            # As over REST: the database cannot store anything now, and the client may try again
            # (a query that only reads is answered 200 all along).
            response.status_code = StorageUnavailable.http_status
            response.headers["Retry-After"] = str(StorageUnavailable.retry_after)
        return response

    async def process_result(self, request: Request, result: ExecutionResult) -> GraphQLHTTPResponse:
        processed = await super().process_result(request, result)
        # The operation's last turn of the event loop (its last list items, its result) and the
        # response's encoding (for the most expensive allowed query, 6 MB of JSON: 16 ms of
        # orjson, and about as long again to free the result) in two turns: each is a wait for
        # every other request of the process.
        await asyncio.sleep(0)
        return processed

    def parse_json(self, data: str | bytes) -> Any:
        """A request body (or GET's `variables`) with Firstlume's limits; an operation, or a list
        of them, must be an object."""
        try:
            value = json_input.loads(data)
        except json_input.JsonRefused as error:
            raise HTTPException(400, str(error)) from None
        if not isinstance(value, (dict, list)):
            raise HTTPException(
                400, 'The request body must be a JSON object, such as {"query": "{ viewer { email } }"}.'
            )
        return value

    def encode_json(self, data: object) -> str:
        # orjson: the encoder holds the interpreter, so its speed is every other request's wait.
        # Text, not bytes: strawberry sends bytes on a WebSocket as a binary frame.
        return json_output.dumps_text(data)

    def decode_json(self, data: str | bytes) -> object:
        """A WebSocket message: one refused closes the socket with 4400 and the reason."""
        try:
            message = json_input.loads(data, what="The message")
        except json_input.JsonRefused as error:
            raise json.JSONDecodeError(str(error), "", 0) from None
        if not isinstance(message, dict):
            raise json.JSONDecodeError("A message must be a JSON object.", "", 0)
        return message

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> GraphQLContext:
        context = GraphQLContext(app=request.app.state.ctx, connection=request, response=response)
        if not isinstance(request, WebSocket):
            context.reads = request.scope[READS_KEY] = ReadScope(context.app.db)
            # Read once the operation is known (AuthenticateCaller, context.py).
            context.authorization = request.headers.get("authorization")
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
        if context.storage_error is not None:
            storage = context.storage_error
            raise ConnectionRejectionError({"code": storage.code, "message": storage.message})
        if context.actor is None:
            raise ConnectionRejectionError({"code": "unauthenticated", "message": context.auth_error})
        accepted: UnsetType = UNSET  # strawberry types the UNSET singleton as Any
        return accepted


def _json_type(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _as_json(scope: Scope) -> Scope:
    """A POST's body is read as JSON whatever its Content-Type says, as the REST routes read
    theirs: `curl -d` sends application/x-www-form-urlencoded. Accepting it opens no cross-site
    door: the caller is known only by the Authorization header, which a browser never adds to a
    cross-site form post."""
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-type"]
    return {**scope, "headers": [*headers, (b"content-type", b"application/json")]}


def _sentence(reason: str) -> str:
    return reason if reason.endswith(".") else reason + "."


def graphql_routes() -> list[BaseRoute]:
    endpoint = FirstlumeGraphQL(schema, subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL])
    return [
        Route("/graphql", endpoint, methods=["GET", "POST"], name="graphql"),
        WebSocketRoute("/graphql", endpoint, name="graphql.ws"),
    ]
