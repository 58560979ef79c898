"""The browser's session cookie as the request's credentials (adoption-api.md section 10).

A request that sends no Authorization header but the session cookie is authenticated with the
session, exactly as with an API token (services/access/sessions.py): the cookie's value becomes
the request's bearer credentials here, so every route, the GraphQL endpoint and its WebSocket
check one kind of credentials. A cookie-authenticated write must also send the session's CSRF
token in X-CSRF-Token (403 `csrf_required` without it): a page of another site can make the
browser send the cookie (on top-level navigations, SameSite=Lax) but cannot read the token. A
WebSocket opened by a page of another origin gets no session at all."""

from __future__ import annotations

from http.cookies import SimpleCookie

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from firstlume.api.json_body import JSONResponse
from firstlume.services.access.sessions import csrf_matches

COOKIE = "firstlume_session"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
COOKIE_AUTHENTICATED = "firstlume.cookie_session"

CSRF_REQUIRED = (
    "A change made with the browser's session cookie must send the session's CSRF token in the "
    "X-CSRF-Token header (GET /api/v1/session gives it); API clients send an API token instead."
)


def session_cookie(headers: Headers) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    cookies: SimpleCookie = SimpleCookie()
    try:
        cookies.load(raw)
    except Exception:
        return None
    morsel = cookies.get(COOKIE)
    if morsel is None or not morsel.value or not morsel.value.isascii():
        return None
    return morsel.value


def _same_origin(headers: Headers) -> bool:
    origin = headers.get("origin")
    if origin is None:
        return True
    return origin.partition("://")[2].rstrip("/") == headers.get("host", "")


class SessionCookies:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        token = None if "authorization" in headers else session_cookie(headers)
        if token is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            if not _same_origin(headers):
                await self.app(scope, receive, send)
                return
        elif scope["method"] not in SAFE_METHODS and not csrf_matches(token, headers.get(CSRF_HEADER)):
            body = {"error": {"code": "csrf_required", "message": CSRF_REQUIRED}}
            await JSONResponse(body, status_code=403)(scope, receive, send)
            return
        authorized = {
            **scope,
            "headers": [*scope["headers"], (b"authorization", b"Bearer " + token.encode("ascii"))],
            COOKIE_AUTHENTICATED: True,
        }
        await self.app(authorized, receive, send)
