"""Around every HTTP request and WebSocket: a request id (the client's X-Request-ID when it sends
a sensible one, else a new one), set for the logs and returned in the response's X-Request-ID;
and the request's duration in firstlume_http_request_duration_seconds, labelled by the route's
template (never the raw path, whose ids would make a series per run). It also notes when the
server first answered, from which the scheduler counts executors' silence."""

from __future__ import annotations

import logging
import re
import time
import uuid
from datetime import UTC, datetime

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from firstlume import metrics
from firstlume.api.json_body import JSONResponse
from firstlume.logs import REQUEST_ID
from firstlume.services.storage import retry_after_headers, storage_failure

log = logging.getLogger("firstlume.api")

INTERNAL_ERROR = "Something went wrong on our side; it has been logged."

SENSIBLE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


class RequestMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = Headers(scope=scope).get("x-request-id", "")
        request_id = given if SENSIBLE_ID.match(given) else uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        if scope["type"] == "websocket":
            try:
                await self.app(scope, receive, send)
            finally:
                REQUEST_ID.reset(token)
            return
        state = scope["app"].state if "app" in scope else None
        if state is not None and getattr(state, "serving_since", None) is None:
            # The first request answered: from now on executors can be heard (scheduler/loop.py).
            state.serving_since = datetime.now(UTC)
        status = 500
        started = time.perf_counter()
        answered = False

        async def sending(message: Message) -> None:
            nonlocal status, answered
            if message["type"] == "http.response.start":
                status = message["status"]
                answered = True
                MutableHeaders(scope=message).append("X-Request-ID", request_id)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as error:
            # Whatever a route let through still gets the JSON shape of every error (Starlette's
            # own answer would be a plain-text 500), and the exception ends here: re-raised, it
            # would make the server drop the connection, the client's next request on it with it.
            if answered:
                log.error(
                    "error after the response started on %s %s",
                    scope["method"],
                    scope["path"],
                    exc_info=error,
                )
            else:
                status = await _answer_error(scope, error, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            metrics.HTTP_DURATION.labels(scope["method"], template, str(status)).observe(
                time.perf_counter() - started
            )
            REQUEST_ID.reset(token)


async def _answer_error(scope: Scope, error: Exception, send: Send) -> int:
    storage = storage_failure(error)
    if storage is not None:
        log.error("%s %s: %s (%s)", scope["method"], scope["path"], storage.message, error)
        ctx = getattr(scope["app"].state, "ctx", None) if "app" in scope else None
        if ctx is not None:
            ctx.storage.failed(storage)
        body = {"error": {"code": storage.code, "message": storage.message, **storage.details}}
        response = JSONResponse(body, status_code=storage.http_status, headers=retry_after_headers(storage))
    else:
        log.error("unexpected error on %s %s", scope["method"], scope["path"], exc_info=error)
        body = {"error": {"code": "internal_error", "message": INTERNAL_ERROR}}
        response = JSONResponse(body, status_code=500)

    async def nothing() -> Message:
        return {"type": "http.disconnect"}

    await response(scope, nothing, send)
    return response.status_code
