"""`terraform login`'s routes (services/access/cli_login.py): the check of the address the CLI
opened (the SPA's authorization page asks it before offering Allow), the person's decision,
and the CLI's token request. Refusals are in OAuth's shape (RFC 6749 §5.2)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import check_query, context_of, endpoint, json_body
from firstlume.api.rest.org_routes import org_request
from firstlume.services.access import cli_login
from firstlume.services.access.cli_login import OAuthError

Handler = Callable[[Request], Awaitable[Response]]
LOGIN = "/api/v1/cli-login"
AUTHORIZE_PATH = "/cli-login"  # the SPA's authorization page
TOKEN_PATH = f"{LOGIN}/token"
MAX_TOKEN_REQUEST = 8 * 1024
# Token answers and refusals are never cached (RFC 6749 §5.1).
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
REQUEST_FIELDS = (
    "client_id",
    "redirect_uri",
    "response_type",
    "code_challenge",
    "code_challenge_method",
    "state",
)


def login_service() -> dict[str, Any]:
    """The discovery document's `login.v1`."""
    return {
        "client": cli_login.CLIENT_ID,
        "grant_types": ["authz_code"],
        "authz": AUTHORIZE_PATH,
        "token": TOKEN_PATH,
        "ports": list(cli_login.PORTS),
    }


def oauth_error(error: OAuthError) -> Response:
    body = {"error": error.error, "error_description": error.description}
    return JSONResponse(body, status_code=error.status, headers=NO_STORE)


def oauth_endpoint(handler: Handler) -> Handler:
    """`endpoint`'s handling, with refusals in OAuth's shape (caught first: `endpoint` turns
    anything it does not know into a 500)."""

    @wraps(handler)
    async def answering(request: Request) -> Response:
        try:
            return await handler(request)
        except OAuthError as error:
            return oauth_error(error)

    return endpoint(answering)


def _one(values: dict[str, Any], name: str) -> str | None:
    value = values.get(name)
    if isinstance(value, list):
        if len(value) != 1:  # RFC 6749 §3.1: a parameter is sent at most once
            raise OAuthError("invalid_request", f"{name} is given {len(value)} times.")
        value = value[0]
    if value is not None and not isinstance(value, str):
        raise OAuthError("invalid_request", f"{name} must be a string.")
    return value


def _authorization_request(values: dict[str, Any]) -> cli_login.AuthorizationRequest:
    fields = [_one(values, name) for name in REQUEST_FIELDS]
    return cli_login.check_request(*fields)


@oauth_endpoint
async def check_authorization(request: Request) -> Response:
    """Whether the authorization page's address is a request this server grants (200), or why not."""
    check_query(request, REQUEST_FIELDS)
    values = {name: request.query_params.getlist(name) for name in request.query_params}
    checked = _authorization_request(values)
    return JSONResponse({"client_id": checked.client_id, "redirect_uri": checked.redirect_uri})


@oauth_endpoint
async def decide(request: Request) -> Response:
    """The person's Allow or Deny: where the browser goes next (the CLI's redirect URI, with a
    code, or with `error=access_denied`)."""
    body = await json_body(request)
    async with org_request(request) as (unit, actor, org):  # who asks, before what they ask
        allow = body.get("allow")
        if not isinstance(allow, bool):
            raise OAuthError("invalid_request", "allow must be true (Allow) or false (Deny).")
        checked = _authorization_request(body)
        if not allow:
            where = cli_login.redirect(
                checked, error="access_denied", error_description="The person denied it."
            )
            return JSONResponse({"redirect": where})
        code = await cli_login.grant(unit.session, actor, org, checked)
    return JSONResponse({"redirect": cli_login.redirect(checked, code=code)}, headers=NO_STORE)


@oauth_endpoint
async def token(request: Request) -> Response:
    """The CLI's token request (form-encoded, as OAuth's token requests are)."""
    raw = await request.body()
    if len(raw) > MAX_TOKEN_REQUEST:
        raise OAuthError("invalid_request", f"The token request is larger than {MAX_TOKEN_REQUEST} bytes.")
    if "application/x-www-form-urlencoded" not in request.headers.get("content-type", ""):
        raise OAuthError("invalid_request", "The token request must be application/x-www-form-urlencoded.")
    try:
        values: dict[str, Any] = parse_qs(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise OAuthError("invalid_request", "The token request's body is not a form.") from None
    asked = cli_login.TokenRequest(
        grant_type=_one(values, "grant_type"),
        code=_one(values, "code"),
        redirect_uri=_one(values, "redirect_uri"),
        client_id=_one(values, "client_id"),
        code_verifier=_one(values, "code_verifier"),
    )
    async with context_of(request).unit() as unit:
        answer = await cli_login.exchange(unit.session, asked)
    if isinstance(answer, OAuthError):
        return oauth_error(answer)
    return JSONResponse({"access_token": answer, "token_type": "bearer"}, headers=NO_STORE)


routes = [
    Route(f"{LOGIN}/check", check_authorization, methods=["GET"], name="cli_login.check"),
    Route("/api/v1/orgs/{org}/cli-login", decide, methods=["POST"], name="cli_login.decide"),
    Route(TOKEN_PATH, token, methods=["POST"], name="cli_login.token"),
]
