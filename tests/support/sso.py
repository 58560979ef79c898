"""Signing in through a served control plane and the test's OIDC provider, as a browser does:
Firstlume's "Sign in" → the provider's authorization page (the person chosen by `sub`) → back
to Firstlume's callback, with the cookies a browser keeps."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from conftest import LiveServer, settings_env, start_live_server, stop_live_server
from firstlume.api.session_cookie import COOKIE
from support.oidc_provider import Provider

CLIENT_ID, CLIENT_SECRET = "firstlume", "firstlume-secret"


@contextmanager
def served_with_sso(database_url: str, tmp_path: Path, provider: Provider) -> Iterator[LiveServer]:
    """A served control plane (no scheduler) signing people in through `provider`."""
    env = settings_env(
        database_url,
        tmp_path / "data",
        FIRSTLUME_SCHEDULER="off",
        FIRSTLUME_OIDC_ISSUER=provider.url,
        FIRSTLUME_OIDC_CLIENT_ID=CLIENT_ID,
        FIRSTLUME_OIDC_CLIENT_SECRET=CLIENT_SECRET,
    )
    served = start_live_server(env, tmp_path / "server.log")
    try:
        yield served
    finally:
        stop_live_server(served)


async def to_provider(
    http: httpx.AsyncClient, provider_url: str, sub: str, params: dict[str, str] | None = None
) -> str:
    """Starts a sign-in and signs `sub` in at the provider: the callback URL it sends back."""
    started = await http.get("/api/v1/sso/login", params=params)
    assert started.status_code == 302, started.text
    authorize = started.headers["location"]
    assert authorize.startswith(provider_url), authorize
    async with httpx.AsyncClient() as idp:
        answered = await idp.post(authorize, data={"sub": sub})
    assert answered.status_code == 302, answered.text
    return answered.headers["location"]


async def sign_in(http: httpx.AsyncClient, provider_url: str, sub: str) -> httpx.Response:
    """The whole sign-in: the callback's response (302 with the session cookie when it worked)."""
    callback = await to_provider(http, provider_url, sub)
    return await http.get(callback)


def session_of(http: httpx.AsyncClient) -> str | None:
    return http.cookies.get(COOKIE)
