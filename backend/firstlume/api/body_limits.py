"""Request bodies: the caller is authenticated before a byte of the body is read, and no body
larger than its route's cap is read at all.

- /api/…: a request with a body and no valid token gets 401 at once, its body unread.
- /graphql: a request without a valid token may send a small body only (a sign-in query), so a
  large one is refused with 413, unread; so may `terraform login`'s token request (8 KiB).
- Caps: FIRSTLUME_MAX_UPLOAD_BYTES for a plan upload and a state write, FIRSTLUME_MAX_JSON_BODY_BYTES
  for every other body. A declared Content-Length over the cap gets 413 before anything is read;
  a body sent without one (chunked) is counted as it streams in and cut off at the cap.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from firstlume.domain.errors import PayloadTooLarge
from firstlume.services.credentials import token_is_known

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# What an unauthenticated GraphQL request may send.
ANONYMOUS_GRAPHQL_BYTES = 64 * 1024
# A declared body this small, sent with a token, goes straight to its route, which authenticates.
SMALL_BODY_BYTES = 64 * 1024
# A plan upload and a state write (a stack's, or one of its Terragrunt units').
_UPLOADS = re.compile(
    r"^/api/v1/executor/plan$|^/api/v1/orgs/[^/]+/stacks/[^/]+/(units/.+/)?state$"
    r"|^/api/v2/workspaces/[^/]+/state-versions$"  # `terraform state push|rm` (the CLI's state)
)

# `terraform login`'s token request: no token yet (the code and its verifier are its
# credentials, checked by the route), a small form at most.
_TOKEN_REQUEST = re.compile(r"^/api/v1/cli-login/token$")
TOKEN_REQUEST_BYTES = 8 * 1024

# A Git host's push: no token, its signature is checked by the route, which caps the body itself
# (api/rest/git_routes.py) before reading it whole.
_SIGNED_WEBHOOK = re.compile(r"^/api/v1/orgs/[^/]+/git/webhook$")


# One code for a body over its cap, wherever it is caught.
BodyTooLarge = PayloadTooLarge


def request_token(headers: dict[str, str]) -> str | None:
    """`Authorization: Bearer <token>`, or HTTP Basic with the token as the password (Terraform's
    http backend)."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode()
        except (binascii.Error, ValueError):
            return None
        return decoded.partition(":")[2] or None
    return None


def _has_body(headers: dict[str, str]) -> bool:
    length = headers.get("content-length")
    if length is not None:
        return length.strip() != "0"
    return "transfer-encoding" in headers


class BodyLimits:
    def __init__(self, app: ASGIApp, *, max_json_bytes: int, max_upload_bytes: int) -> None:
        self.app = app
        self.max_json_bytes = max_json_bytes
        self.max_upload_bytes = max_upload_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path.startswith("/api/") or path == "/graphql"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if not _has_body(headers) or _SIGNED_WEBHOOK.match(path):
            await self.app(scope, receive, send)
            return
        token = request_token(headers)
        declared = headers.get("content-length", "").strip()
        if token and declared.isdigit() and int(declared) <= SMALL_BODY_BYTES:
            # A small body costs nothing to read, and the route authenticates its caller anyway:
            # no second token lookup for every ordinary request (the hot paths' statement count).
            await self.app(scope, receive, send)
            return
        known = await self._known(scope, token)
        if path.startswith("/api/") and not known and not _TOKEN_REQUEST.match(path):
            await _refuse(send, 401, "unauthenticated", "Send a valid token ('Authorization: Bearer <token>') "
                          "before a request body; this one was not read.")  # fmt: skip
            return
        limit = self.max_upload_bytes if _UPLOADS.match(path) else self.max_json_bytes
        if not known:
            limit = min(limit, TOKEN_REQUEST_BYTES if _TOKEN_REQUEST.match(path) else ANONYMOUS_GRAPHQL_BYTES)
        if declared.isdigit() and int(declared) > limit:
            await _refuse(send, 413, BodyTooLarge.code, _too_large(limit, known))
            return
        await self._counted(scope, receive, send, limit, known)

    async def _known(self, scope: Scope, token: str | None) -> bool:
        if not token:
            return False
        async with scope["app"].state.ctx.db.read() as session:
            return await token_is_known(session, token)

    async def _counted(self, scope: Scope, receive: Receive, send: Send, limit: int, known: bool) -> None:
        """The app reads the body as it streams in; past `limit` bytes, reading fails with 413."""
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(_too_large(limit, known))
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge as error:
            if started:
                raise
            await _refuse(send, 413, error.code, error.message)


def _too_large(limit: int, known: bool) -> str:
    if not known:
        return f"A request without a valid token may send at most {limit} bytes; this one was not read."
    return f"The request body is larger than this route takes ({limit} bytes)."


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
