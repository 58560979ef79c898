"""Single sign-on (adoption-api.md section 10): what the sign-in page offers, the way to the
identity provider and back, the session's CSRF token, sign-out, and each organization's mapping
of the provider's groups."""

from __future__ import annotations

import base64
from datetime import timedelta

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import bearer_token, check_query, context_of, endpoint, json_body
from firstlume.api.rest.org_routes import org_read, org_request
from firstlume.api.session_cookie import COOKIE, session_cookie
from firstlume.api.validation import command
from firstlume.domain.errors import Unauthenticated
from firstlume.services import accounts
from firstlume.services.access import oidc, sessions, sso_mapping
from firstlume.services.access.commands import PutSso
from firstlume.services.accounts import ensure_user
from firstlume.services.context import Actor

# The state of the sign-in this browser started: the callback must carry the same one.
STATE_COOKIE = "firstlume_sso_state"
SSO_PATH = "/api/v1/sso"
# Where the browser goes back to after the sign-in (the page that sent it to sign in, such as
# `terraform login`'s authorization page), kept with the state.
RETURN_COOKIE = "firstlume_sso_return"
MAX_RETURN_PATH = 2000


def return_path(value: str | None) -> str | None:
    """A path of this site only (never another site's address, nor `//host`)."""
    if not value or len(value) > MAX_RETURN_PATH or not value.isascii() or not value.isprintable():
        return None
    if not value.startswith("/") or value.startswith("//") or "\\" in value:
        return None
    return value


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


@endpoint
async def sso_config(request: Request) -> Response:
    check_query(request)
    settings = context_of(request).settings
    enabled = oidc.configured(settings)
    return JSONResponse(
        {
            "enabled": enabled,
            "issuer": settings.oidc_issuer if enabled else None,
            "sign_in_url": f"{SSO_PATH}/login" if enabled else None,
        }
    )


@endpoint
async def sso_login(request: Request) -> Response:
    ctx = context_of(request)
    async with ctx.db.transaction() as session:
        url, state = await oidc.begin(session, ctx.settings)
    response = RedirectResponse(url, status_code=302)
    response.set_cookie(
        STATE_COOKIE,
        state,
        max_age=int(oidc.LOGIN_LIFETIME.total_seconds()),
        path=SSO_PATH,
        httponly=True,
        samesite="lax",
        secure=_secure(request),
    )
    back = return_path(request.query_params.get("next"))
    if back is not None:
        response.set_cookie(
            RETURN_COOKIE,
            base64.urlsafe_b64encode(back.encode()).decode(),
            max_age=int(oidc.LOGIN_LIFETIME.total_seconds()),
            path=SSO_PATH,
            httponly=True,
            samesite="lax",
            secure=_secure(request),
        )
    return response


def _returning_to(request: Request) -> str:
    kept = request.cookies.get(RETURN_COOKIE, "")
    try:
        back = return_path(base64.urlsafe_b64decode(kept.encode()).decode()) if kept else None
    except ValueError:
        back = None
    return back or "/"


@endpoint
async def sso_callback(request: Request) -> Response:
    ctx = context_of(request)
    params = request.query_params
    error = params.get("error")
    async with ctx.db.transaction() as session:
        login = await oidc.take_login(session, params.get("state"), request.cookies.get(STATE_COOKIE))
    if error:
        raise oidc.SignInRefused(f"The identity provider did not sign you in ({error[:200]}).")
    identity = await oidc.finish(ctx.settings, login, params.get("code"))
    lifetime = ctx.settings.session_hours
    async with ctx.unit() as unit:
        user = await ensure_user(unit.session, identity.email)
        actor = Actor(user_id=user.id, email=user.email)
        member_of = await sso_mapping.apply_at_sign_in(unit.session, actor, identity.groups)
        started = await sessions.start_session(
            unit.session,
            actor,
            timedelta(hours=lifetime),
            {"issuer": ctx.settings.oidc_issuer, "organizations": member_of},
        )
    response = RedirectResponse(_returning_to(request), status_code=302)
    response.set_cookie(
        COOKIE,
        started.token,
        max_age=int(lifetime * 3600),
        path="/",
        httponly=True,
        samesite="lax",
        secure=_secure(request),
    )
    response.delete_cookie(STATE_COOKIE, path=SSO_PATH)
    response.delete_cookie(RETURN_COOKIE, path=SSO_PATH)
    return response


@endpoint
async def sso_logout(request: Request) -> Response:
    token = session_cookie(request.headers)
    if token is not None:
        async with context_of(request).unit() as unit:
            await sessions.end_session(unit.session, token)
    response = Response(status_code=204)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="lax", secure=_secure(request))
    return response


@endpoint
async def current_session(request: Request) -> Response:
    """Who the browser's session is, and its CSRF token: the SPA's first request."""
    check_query(request)
    token = session_cookie(request.headers)
    if token is None or bearer_token(request) != token:
        raise Unauthenticated("No session: sign in first (or send an API token to the API).")
    async with context_of(request).db.read() as session:
        actor = await accounts.authenticate(session, token)
    return JSONResponse({"email": actor.email, "csrf_token": sessions.csrf_token(token)})


@endpoint
async def get_sso(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        answer = await sso_mapping.get_mapping(session, org)
    return JSONResponse(answer)


@endpoint
async def put_sso(request: Request) -> Response:
    body = await json_body(request)
    async with org_request(request) as (unit, _, org):
        answer = await sso_mapping.put_mapping(unit.session, org, command(PutSso, body))
    return JSONResponse(answer)


O = "/api/v1/orgs/{org}"

routes = [
    Route(SSO_PATH, sso_config, methods=["GET"], name="sso.config"),
    Route(f"{SSO_PATH}/login", sso_login, methods=["GET"], name="sso.login"),
    Route(oidc.CALLBACK_PATH, sso_callback, methods=["GET"], name="sso.callback"),
    Route(f"{SSO_PATH}/logout", sso_logout, methods=["POST"], name="sso.logout"),
    Route("/api/v1/session", current_session, methods=["GET"], name="session.get"),
    Route(f"{O}/sso", get_sso, methods=["GET"], name="sso.get"),
    Route(f"{O}/sso", put_sso, methods=["PUT"], name="sso.put"),
]
