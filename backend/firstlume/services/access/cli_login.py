"""`terraform login` (adoption-api.md §7): OAuth 2.0 authorization code with PKCE (S256), as
Terraform's login protocol (`login.v1`) speaks it, for one public client, "terraform-cli",
whose redirect URI is http://localhost:<port>/login on a port of the discovered range.

The person's "Allow" (the authorization page, signed in to Firstlume as for any page) gives a
code bound to the client, the redirect URI, the PKCE challenge and the person; the CLI's token
request exchanges it, with the PKCE verifier, for an API token named "terraform login": a token
like one made on the Tokens page, listed and revoked there.

Plain code rather than Authlib's AuthorizationServer: that one is synchronous (its grant hooks
query and save codes without awaiting) while every database access here is async, and its
framework glue exists for Flask and Django only. The protocol is small: one client, one grant;
Authlib still computes the S256 challenge. Every refusal is an `OAuthError` in RFC 6749's
words (§4.1.2.1, §5.2)."""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode, urlsplit

from authlib.oauth2.rfc7636 import create_s256_code_challenge
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import hash_token, new_token
from firstlume.db.models import ApiToken, User
from firstlume.db.models_cli import CliLoginCode
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.services import audit
from firstlume.services.context import Actor
from firstlume.services.reads.catalog import OrganizationRecord

CLIENT_ID = "terraform-cli"
PORTS = (10000, 10010)
REDIRECT_PATH = "/login"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
CODE_LIFETIME = timedelta(seconds=60)
TOKEN_NAME = "terraform login"
# RFC 7636 §4.1 (verifier) and §4.2 (an S256 challenge is 43 characters of base64url).
VERIFIER = re.compile(r"[A-Za-z0-9\-._~]{43,128}")
CHALLENGE = re.compile(r"[A-Za-z0-9\-_]{43}")
# Spent and expired codes are kept this long (a replay within it revokes what the code gave).
KEPT = timedelta(hours=1)


class OAuthError(Exception):
    """A refusal in OAuth's shape: `{"error": <code>, "error_description": <sentence>}`."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """What the CLI put in the authorization page's address."""

    client_id: str
    redirect_uri: str
    code_challenge: str
    state: str


def check_request(
    client_id: str | None,
    redirect_uri: str | None,
    response_type: str | None,
    code_challenge: str | None,
    code_challenge_method: str | None,
    state: str | None,
) -> AuthorizationRequest:
    """The authorization request, checked. A wrong client or redirect URI is told to the person
    on the page, never redirected to (RFC 6749 §4.1.2.1): the address could be anyone's."""
    if client_id != CLIENT_ID:
        raise OAuthError(
            "invalid_client", f"Unknown client {client_id!r}: only {CLIENT_ID!r} may log in here."
        )
    check_redirect_uri(redirect_uri)
    assert redirect_uri is not None
    if response_type != "code":
        raise OAuthError(
            "unsupported_response_type", "Only response_type=code (authorization code) is supported."
        )
    if code_challenge_method != "S256":
        raise OAuthError("invalid_request", "PKCE is required, with code_challenge_method=S256.")
    if code_challenge is None or not CHALLENGE.fullmatch(code_challenge):
        raise OAuthError(
            "invalid_request", "code_challenge must be an S256 challenge (43 base64url characters)."
        )
    if state is not None and len(state) > 500:
        raise OAuthError("invalid_request", "state is longer than 500 characters.")
    return AuthorizationRequest(client_id, redirect_uri, code_challenge, state or "")


def check_redirect_uri(redirect_uri: str | None) -> None:
    """http://localhost:<port>/login, the port in the range the discovery document gives."""
    low, high = PORTS
    wanted = f"http://localhost:<port>{REDIRECT_PATH} with a port from {low} to {high}"
    if not redirect_uri or len(redirect_uri) > 200:
        raise OAuthError("invalid_request", f"redirect_uri is missing: it must be {wanted}.")
    try:
        parts = urlsplit(redirect_uri)
        port = parts.port
    except ValueError:
        raise OAuthError("invalid_request", f"redirect_uri is not an address: it must be {wanted}.") from None
    if (
        parts.scheme != "http"
        or parts.hostname not in LOOPBACK_HOSTS
        or parts.username is not None
        or parts.path != REDIRECT_PATH
        or parts.query
        or parts.fragment
    ):
        raise OAuthError(
            "invalid_request", f"redirect_uri {redirect_uri!r} is not allowed: it must be {wanted}."
        )
    if port is None or not low <= port <= high:
        raise OAuthError(
            "invalid_request", f"redirect_uri's port {port} is outside the login ports {low} to {high}."
        )


def redirect(request: AuthorizationRequest, **params: str) -> str:
    """The redirect URI with `params` and the request's state."""
    query = {**params, **({"state": request.state} if request.state else {})}
    return f"{request.redirect_uri}?{urlencode(query)}"


async def grant(
    session: AsyncSession, actor: Actor, org: OrganizationRecord, request: AuthorizationRequest
) -> str:
    """The person's "Allow": a new code (returned once; only its hash is stored)."""
    now = utcnow()
    await session.execute(delete(CliLoginCode).where(CliLoginCode.expires_at < now - KEPT))
    code = new_token("flc")
    session.add(
        CliLoginCode(
            code_hash=hash_token(code),
            user_id=actor.user_id,
            org_id=org.id,
            client_id=request.client_id,
            redirect_uri=request.redirect_uri,
            code_challenge=request.code_challenge,
            created_at=now,
            expires_at=now + CODE_LIFETIME,
        )
    )
    await session.flush()
    return code


@dataclass(frozen=True, slots=True)
class TokenRequest:
    grant_type: str | None
    code: str | None
    redirect_uri: str | None
    client_id: str | None
    code_verifier: str | None


async def exchange(session: AsyncSession, request: TokenRequest) -> str | OAuthError:
    """The CLI's token request: the code and its verifier for a new API token (returned once).
    A refusal after the code was found is returned, not raised: the code's spending (and a
    replay's revocation) must commit with the refusal."""
    if request.grant_type != "authorization_code":
        raise OAuthError("unsupported_grant_type", "Only grant_type=authorization_code is supported.")
    if request.client_id != CLIENT_ID:
        raise OAuthError("invalid_client", f"Unknown client {request.client_id!r}.", status=401)
    if not request.code or len(request.code) > 200:
        raise OAuthError("invalid_request", "The code is missing.")
    if not request.code_verifier or not VERIFIER.fullmatch(request.code_verifier):
        raise OAuthError(
            "invalid_request", "code_verifier must be 43 to 128 unreserved characters (RFC 7636)."
        )
    row = await session.scalar(
        select(CliLoginCode).where(CliLoginCode.code_hash == hash_token(request.code)).with_for_update()
    )
    if row is None:
        raise OAuthError("invalid_grant", "This authorization code is not known: run terraform login again.")
    now = utcnow()
    if row.used_at is not None:
        await _revoke_given(session, row)
        return OAuthError(
            "invalid_grant",
            "This authorization code was already used; the token it gave is revoked. Run terraform login again.",
        )
    row.used_at = now  # spent now, whatever follows: a wrong verifier gets no second try
    await session.flush()
    if row.expires_at <= now:
        return OAuthError("invalid_grant", "This authorization code has expired: run terraform login again.")
    if row.client_id != request.client_id or row.redirect_uri != request.redirect_uri:
        return OAuthError("invalid_grant", "The redirect_uri is not the one this code was issued for.")
    if not hmac.compare_digest(create_s256_code_challenge(request.code_verifier), row.code_challenge):
        return OAuthError(
            "invalid_grant",
            "The code_verifier does not match this code's challenge: run terraform login again.",
        )
    token = new_token("fl")
    issued = ApiToken(user_id=row.user_id, token_hash=hash_token(token), name=TOKEN_NAME)
    session.add(issued)
    await session.flush()
    row.token_id = issued.id
    actor = Actor(user_id=row.user_id, email=await _email(session, row.user_id))
    await audit.record(
        session,
        row.org_id,
        AuditAction.TOKEN_CREATE,
        f"token:{issued.id}",
        {"name": TOKEN_NAME, "expires_at": None, "via": "terraform login"},
        actor=actor,
    )
    return token


async def _revoke_given(session: AsyncSession, row: CliLoginCode) -> None:
    if row.token_id is None:
        return
    issued = await session.get(ApiToken, row.token_id, with_for_update=True)
    if issued is not None and issued.revoked_at is None:
        issued.revoked_at = utcnow()
        actor = Actor(user_id=row.user_id, email=await _email(session, row.user_id))
        await audit.record(
            session,
            row.org_id,
            AuditAction.TOKEN_REVOKE,
            f"token:{issued.id}",
            {"name": issued.name, "why": "its terraform login code was used again"},
            actor=actor,
        )


async def _email(session: AsyncSession, user_id: str) -> str:
    return str(await session.scalar(select(User.email).where(User.id == user_id)))
