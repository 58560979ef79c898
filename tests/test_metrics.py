"""/metrics after real runs on a served control plane: runs by status, queue depth, phase
durations, scheduler claims, HTTP and GraphQL request durations, active subscriptions, with the
counts the runs imply; and every response carries a request id that the JSON logs repeat."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from firstlume.api.middleware import RequestMiddleware
from firstlume.logs import JsonFormatter, RequestIdFilter


def test_log_lines_are_json_with_the_request_id() -> None:
    """A record logged while a request is handled carries its id, in a JSON line."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger("firstlume.test_metrics")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    async def logs(request: Request) -> Response:
        logger.info("handled %s", request.url.path)
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/x/{id}", logs)], middleware=[Middleware(RequestMiddleware)])

    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
            return await http.get("/x/1", headers={"X-Request-ID": "req-7"})

    try:
        response = asyncio.run(call())
    finally:
        logger.removeHandler(handler)
    assert response.headers["x-request-id"] == "req-7"
    (line,) = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["request_id"] == "req-7" and entry["message"] == "handled /x/1" and entry["level"] == "info"


def test_heartbeat_and_log_upload_access_lines_are_debug() -> None:
    from firstlume.logs import RoutineAccessAtDebug

    def access(path: str) -> logging.LogRecord:
        return logging.LogRecord(
            "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
            ("127.0.0.1:5", "POST", path, "1.1", 204), None,
        )  # fmt: skip

    quiet = RoutineAccessAtDebug()
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    try:
        heartbeat, upload, start = (
            access("/api/v1/executor/heartbeat"),
            access("/api/v1/executor/logs"),
            access("/api/v1/orgs/acme/stacks/app/runs"),
        )
        assert not quiet.filter(heartbeat) and not quiet.filter(upload)
        assert heartbeat.levelname == "DEBUG" and quiet.filter(start) and start.levelname == "INFO"
        root.setLevel(logging.DEBUG)
        assert quiet.filter(access("/api/v1/executor/heartbeat"))
    finally:
        root.setLevel(level)
