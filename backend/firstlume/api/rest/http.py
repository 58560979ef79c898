"""Request parsing, authentication and error responses shared by every REST route."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from functools import wraps
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Match, Route

from firstlume.api.authorization import token_from
from firstlume.api.disconnect import client_left
from firstlume.api.json_body import JSONResponse
from firstlume.domain import json_input
from firstlume.domain.audit import AuditVia
from firstlume.domain.errors import (
    FirstlumeError,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    StorageUnavailable,
)
from firstlume.services.audit import entered_via
from firstlume.services.context import Context
from firstlume.services.storage import retry_after_headers, storage_failure

log = logging.getLogger("firstlume.api")

MAX_BODY_BYTES = 600 * 1024 * 1024


class InvalidJson(FirstlumeError):
    code = "invalid_json"
    http_status = 400


# One code for a body over its cap, wherever it is caught.
BodyTooLarge = PayloadTooLarge


def error_response(
    http_status: int, code: str, message: str, /, headers: dict[str, str] | None = None, **details: Any
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, **details}}, status_code=http_status, headers=headers
    )


def storage_response(request: Request, error: StorageUnavailable) -> JSONResponse:
    """503 with the sentence and Retry-After; the failure is noted for /readyz."""
    note_storage_failure(request, error)
    return error_response(
        error.http_status, error.code, error.message, headers=retry_after_headers(error), **error.details
    )


def note_storage_failure(request: Request, error: StorageUnavailable) -> None:
    ctx = getattr(request.app.state, "ctx", None)
    if ctx is not None:
        ctx.storage.failed(error)


def context_of(request: Request) -> Context:
    return request.app.state.ctx  # type: ignore[no-any-return]


def bearer_token(request: Request) -> str | None:
    """`Authorization: Bearer <token>`; None without one. Raises Unauthenticated for a header
    that holds no usable token (Basic credentials, another scheme), saying which."""
    return token_from(request.headers.get("authorization"))


async def json_body(request: Request) -> dict[str, Any]:
    """The body as a JSON object, whatever the Content-Type says (curl -d sends a form type).
    An empty body counts as {}."""
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise BodyTooLarge(f"The request body is larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB.")
    if not raw.strip():
        return {}
    try:
        body = json_input.loads(raw)
    except json_input.JsonRefused as error:
        raise InvalidJson(str(error)) from None
    if not isinstance(body, dict):
        raise InvalidJson('The request body must be a JSON object, such as {"type": "plan"}.')
    # A NUL in a JSON string is always written \u0000 (a raw one is invalid JSON): a body
    # without that escape needs no walk.
    if b"\\u0000" in raw and _has_nul(body):
        raise InvalidRequest("Text in the request must not contain NUL characters (\\u0000).")
    return body


def _has_nul(value: Any) -> bool:
    # PostgreSQL cannot store NUL in text: refuse it up front, the same on every database.
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def check_query(request: Request, allowed: Iterable[str] = ()) -> None:
    """Refuses query parameters the route does not know: a misspelt filter must not silently
    return everything."""
    known = set(allowed)
    for name in request.query_params:
        if name not in known:
            expected = f"it takes {', '.join(sorted(known))}" if known else "it takes none"
            raise InvalidRequest(f"Unknown query parameter '{name}'; {expected}.", field=name)


def query_values(request: Request, name: str) -> list[str]:
    """Every value of a parameter given as a list: repeated (?status=a&status=b) or
    comma-separated (?status=a,b)."""
    return [v.strip() for raw in request.query_params.getlist(name) for v in raw.split(",") if v.strip()]


def int_param(request: Request, name: str, default: int | None, low: int, high: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidRequest(f"'{name}' must be a whole number; got {raw!r}.", field=name) from None
    if not low <= value <= high:
        raise InvalidRequest(f"'{name}' must be between {low} and {high}.", field=name)
    return value


def bool_param(request: Request, name: str, default: bool) -> bool:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    value = {"true": True, "1": True, "false": False, "0": False}.get(raw.lower())
    if value is None:
        raise InvalidRequest(f"'{name}' must be true or false; got {raw!r}.", field=name)
    return value


Handler = Callable[[Request], Awaitable[Response]]


def endpoint(handler: Handler) -> Handler:
    """Turns expected failures into their documented responses and anything unexpected into a
    500 without details: a stack trace never reaches a client."""

    @wraps(handler)
    async def wrapped(request: Request) -> Response:
        # The audit trail records changes made by this request with its id (the middleware's,
        # which the response carries in X-Request-ID).
        entered_via(AuditVia.REST, request.headers.get("x-request-id"))
        return await _handle(handler, request)

    return wrapped


async def _handle(handler: Handler, request: Request) -> Response:
    try:
        if _has_nul(list(request.path_params.values())):
            raise NotFound("Nothing here: the path contains a NUL character.")
        if _has_nul(list(request.query_params.values())):
            raise InvalidRequest("Query parameters must not contain NUL characters.")
        return await handler(request)
    except StorageUnavailable as error:
        return storage_response(request, error)
    except FirstlumeError as error:
        return error_response(error.http_status, error.code, error.message, **error.details)
    except ClientDisconnect:
        return client_left(request)
    except Exception as error:
        storage = storage_failure(error)
        if storage is not None:
            log.error("%s %s: %s (%s)", request.method, request.url.path, storage.message, error)
            return storage_response(request, storage)
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error", "Something went wrong on our side; it has been logged.")


class MethodNotAllowed(FirstlumeError):
    code = "method_not_allowed"
    http_status = 405


@endpoint
async def not_found_route(request: Request) -> Response:
    """Every /api/ request no route took: 405 with Allow when the path is served for other
    methods, else 404."""
    allowed = _allowed_methods(request)
    if allowed:
        error = MethodNotAllowed(
            f"{request.method} is not allowed on {request.url.path}; it takes {', '.join(allowed)}.",
            allowed=allowed,
        )
        response = error_response(error.http_status, error.code, error.message, **error.details)
        response.headers["Allow"] = ", ".join(allowed)
        return response
    raise NotFound(f"No route {request.method} {request.url.path}.")


def _allowed_methods(request: Request) -> list[str]:
    """The methods the API's routes take on this path (a route whose path matches but whose
    methods do not is a partial match); none when the path is not the API's."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if not isinstance(route, Route) or not route.path.startswith("/api/") or not route.methods:
            continue
        if route.name != "not_found_route" and route.matches(request.scope)[0] is Match.PARTIAL:
            methods |= route.methods
    return sorted(methods)
