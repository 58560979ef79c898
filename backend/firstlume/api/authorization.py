"""The API token of a request's Authorization header, for REST, the state routes and GraphQL
alike. A header that was sent but holds no usable token is refused naming what is wrong with
it, not answered as if no token had been sent."""

from __future__ import annotations

import base64
import binascii

from firstlume.domain.errors import Unauthenticated

BEARER = "'Authorization: Bearer <token>'"


def token_from(header: str | None, *, basic: bool = False) -> str | None:
    """The token of `header`; None when there is none (the caller's "send an API token").
    `basic`: HTTP Basic with the token as the password is accepted too (Terraform's http
    backend; the user name is ignored)."""
    if header is None or not header.strip():
        return None
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer":
        return value or None
    if scheme.lower() != "basic":
        raise Unauthenticated(f"'{scheme}' authorization is not accepted; send an API token as {BEARER}.")
    if not basic:
        raise Unauthenticated(
            "HTTP Basic credentials are accepted only by the state routes (Terraform's http backend); "
            f"send the API token here as {BEARER}."
        )
    try:
        decoded = base64.b64decode(value, validate=True).decode()
    except (binascii.Error, ValueError):
        decoded = None
    if decoded is None or ":" not in decoded:
        raise Unauthenticated(
            "The Basic credentials are not base64 of 'user:password'; send the API token as the "
            "password (any user name)."
        )
    token = decoded.partition(":")[2]
    if not token:
        raise Unauthenticated(
            "The Basic credentials hold no password: send the API token as the password (any user name)."
        )
    return token
