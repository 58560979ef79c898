"""Around every HTTP request and WebSocket: a request id (the client's X-Request-ID when it sends
a sensible one, else a new one), set for the logs and returned in the response's X-Request-ID;
and the request's duration in firstlume_http_request_duration_seconds, labelled by the route's
template (never the raw path, whose ids would make a series per run). It also notes when the
server first answered, from which the scheduler counts executors' silence."""

from __future__ import annotations

import re
import time
import uuid
from datetime import UTC, datetime

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from firstlume import metrics
from firstlume.logs import REQUEST_ID

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

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message).append("X-Request-ID", request_id)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            metrics.HTTP_DURATION.labels(scope["method"], template, str(status)).observe(
                time.perf_counter() - started
            )
            REQUEST_ID.reset(token)
