"""Signing in through the organization's OpenID Connect provider: authorization code with PKCE,
state and nonce, the ID token verified against the issuer's published keys.

The protocol is Authlib's (discovery, the authorization URL with PKCE and nonce, the code
exchange, the ID token's signature, issuer, audience, expiry and nonce, the key set fetched again
when a token names a key it does not hold: key rotation); this module keeps what Authlib leaves
to its caller: the sign-in waiting for its callback, taken once, and what a refusal says."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import Any

from authlib.integrations.base_client import OAuthError
from authlib.integrations.starlette_client import OAuth, StarletteOAuth2App
from joserfc.errors import BadSignatureError, JoseError
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import hash_token
from firstlume.db.models_sso import SsoLogin
from firstlume.db.types import utcnow
from firstlume.domain.errors import NotFound, Unauthenticated
from firstlume.domain.sso import groups_of_claim
from firstlume.settings import Settings

log = logging.getLogger(__name__)

# A person has this long between "Sign in with …" and coming back from the provider.
LOGIN_LIFETIME = timedelta(minutes=10)
CALLBACK_PATH = "/api/v1/sso/callback"


class SsoNotConfigured(NotFound):
    code = "sso_not_configured"
    http_status = 404


class SignInRefused(Unauthenticated):
    """The provider's answer could not be trusted or used: no session is made."""

    code = "sign_in_refused"
    http_status = 401


@dataclass(frozen=True)
class Identity:
    """Who the provider vouched for."""

    subject: str
    email: str
    groups: list[str]


def configured(settings: Settings) -> bool:
    return bool(settings.oidc_issuer and settings.oidc_client_id)


def redirect_uri(settings: Settings) -> str:
    return settings.public_url + CALLBACK_PATH


def _scopes(settings: Settings) -> str:
    scopes = settings.oidc_scopes.split()
    return " ".join(["openid", *[s for s in scopes if s != "openid"]])


@lru_cache(maxsize=8)
def _client(issuer: str, client_id: str, client_secret: str, scopes: str) -> StarletteOAuth2App:
    # One per configuration and process: it caches the discovery document and the key set.
    oauth = OAuth()
    client = oauth.register(
        name="idp",
        client_id=client_id,
        client_secret=client_secret,
        server_metadata_url=issuer.rstrip("/") + "/.well-known/openid-configuration",
        client_kwargs={"scope": scopes, "code_challenge_method": "S256"},
    )
    assert isinstance(client, StarletteOAuth2App)
    return client


def client_for(settings: Settings) -> StarletteOAuth2App:
    if not configured(settings):
        raise SsoNotConfigured(
            "Single sign-on is not configured here (FIRSTLUME_OIDC_ISSUER); sign in with an API token."
        )
    return _client(
        settings.oidc_issuer, settings.oidc_client_id, settings.oidc_client_secret, _scopes(settings)
    )


async def begin(session: AsyncSession, settings: Settings) -> tuple[str, str]:
    """The provider's authorization URL for a new sign-in, and its state (the caller binds it to
    the browser). The PKCE verifier and the nonce wait in the database for the callback."""
    client = client_for(settings)
    try:
        found = await client.create_authorization_url(redirect_uri(settings))
    except Exception as error:
        log.warning("the identity provider's discovery document could not be read: %s", error)
        raise SignInRefused(
            f"The identity provider {settings.oidc_issuer} could not be reached; try again in a moment."
        ) from None
    await session.execute(delete(SsoLogin).where(SsoLogin.expires_at < utcnow()))
    session.add(
        SsoLogin(
            state_hash=hash_token(found["state"]),
            nonce=found["nonce"],
            code_verifier=found["code_verifier"],
            expires_at=utcnow() + LOGIN_LIFETIME,
        )
    )
    await session.flush()
    return str(found["url"]), str(found["state"])


async def take_login(session: AsyncSession, state: str | None, browser_state: str | None) -> SsoLogin:
    """The sign-in this callback finishes, taken once: a replayed or forged callback, or one
    finished in another browser than the one that started it, finds none."""
    if not state or not browser_state or state != browser_state:
        raise SignInRefused(
            'The sign-in\'s state does not match the one this browser started; start again from "Sign in".'
        )
    login = await session.scalar(
        select(SsoLogin).where(SsoLogin.state_hash == hash_token(state)).with_for_update()
    )
    if login is None or login.expires_at < utcnow():
        raise SignInRefused(
            'This sign-in is unknown, finished already or expired; start again from "Sign in".'
        )
    await session.delete(login)
    await session.flush()
    return login


async def finish(settings: Settings, login: SsoLogin, code: str | None) -> Identity:
    """Exchanges the code (with the PKCE verifier) and verifies the ID token: signature against
    the issuer's keys, issuer, audience, expiry and nonce."""
    client = client_for(settings)
    if not code:
        raise SignInRefused("The identity provider sent no authorization code back.")
    try:
        token = await client.fetch_access_token(
            redirect_uri=redirect_uri(settings), code=code, code_verifier=login.code_verifier
        )
    except OAuthError as error:
        raise SignInRefused(
            f"The identity provider refused the authorization code ({error.error}): it may have been "
            'used already; start again from "Sign in".'
        ) from None
    except Exception as error:
        log.warning("exchanging the authorization code failed: %s", error)
        raise SignInRefused("The identity provider could not be reached to finish the sign-in.") from None
    metadata = await client.load_server_metadata()
    if str(metadata.get("issuer", "")).rstrip("/") != settings.oidc_issuer.rstrip("/"):
        # OpenID Connect Discovery: the document must name the issuer it was fetched for.
        raise SignInRefused(
            f"The identity provider's discovery document names another issuer than {settings.oidc_issuer}."
        )
    if "id_token" not in token:
        raise SignInRefused("The identity provider sent no ID token.")
    try:
        try:
            claims = await client.parse_id_token(token, nonce=login.nonce, leeway=60)
        except BadSignatureError:
            # Authlib fetches the key set again for a key id it does not hold; a provider that
            # names no key id and rotated its key fails the signature instead: once more with the
            # key set as published now.
            await client.fetch_jwk_set(force=True)
            claims = await client.parse_id_token(token, nonce=login.nonce, leeway=60)
    except JoseError as error:
        raise SignInRefused(_why(error)) from None
    return _identity(settings, dict(claims))


def _why(error: JoseError) -> str:
    kind = type(error).__name__
    said = getattr(error, "description", None) or str(error)
    return f"The identity provider's ID token was refused ({kind}: {said}); no session was made."


def _identity(settings: Settings, claims: dict[str, Any]) -> Identity:
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise SignInRefused(
            "The ID token names no email address; ask for the 'email' scope (FIRSTLUME_OIDC_SCOPES)."
        )
    return Identity(
        subject=str(claims["sub"]),
        email=email,
        groups=groups_of_claim(claims.get(settings.oidc_groups_claim)),
    )
