"""`terraform login`'s OAuth 2.0 (authorization code with PKCE) in process, on both databases:
the way through, and every bad input refused with a 4xx in RFC 6749 §5.2's shape, never a 500.
The real CLI and browser go through it in tests/e2e/test_cli_login.py."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import select, update

from conftest import Tenant
from firstlume.db.models import ApiToken
from firstlume.db.models_audit import AuditEntry
from firstlume.db.models_cli import CliLoginCode
from firstlume.db.types import utcnow
from firstlume.services.context import Context

REDIRECT = "http://localhost:10003/login"
TOKEN = "/api/v1/cli-login/token"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def asked(challenge: str, **changes: Any) -> dict[str, Any]:
    request = {
        "client_id": "terraform-cli",
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "the-cli-state",
    }
    request.update(changes)
    return {k: v for k, v in request.items() if v is not None}


async def allow(client: httpx.AsyncClient, tenant: Tenant, challenge: str, **changes: Any) -> httpx.Response:
    body = {**asked(challenge, **changes), "allow": True}
    return await client.post(
        f"/api/v1/orgs/{tenant.org}/cli-login", content=json.dumps(body), headers=tenant.headers
    )


async def code_for(client: httpx.AsyncClient, tenant: Tenant, challenge: str) -> str:
    response = await allow(client, tenant, challenge)
    assert response.status_code == 200, response.text
    where = urlsplit(response.json()["redirect"])
    assert f"{where.scheme}://{where.netloc}{where.path}" == REDIRECT
    query = parse_qs(where.query)
    assert query["state"] == ["the-cli-state"]
    return query["code"][0]


async def exchange(
    client: httpx.AsyncClient, given: str, verifier: str, **changes: str | None
) -> httpx.Response:
    form = {
        "grant_type": "authorization_code",
        "code": given,
        "redirect_uri": REDIRECT,
        "client_id": "terraform-cli",
        "code_verifier": verifier,
    }
    form.update(changes)  # type: ignore[arg-type]
    return await client.post(TOKEN, data={k: v for k, v in form.items() if v is not None}, headers=FORM)


def refused(response: httpx.Response, error: str, status: int = 400) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == error, body
    assert isinstance(body["error_description"], str) and body["error_description"].endswith("."), body
    assert response.headers["cache-control"] == "no-store"
    return str(body["error_description"])


async def test_discovery_offers_login_v1(client: httpx.AsyncClient) -> None:
    login = (await client.get("/.well-known/terraform.json")).json()["login.v1"]
    assert login == {
        "client": "terraform-cli",
        "grant_types": ["authz_code"],
        "authz": "/cli-login",
        "token": "/api/v1/cli-login/token",
        "ports": [10000, 10010],
    }


async def test_the_code_and_its_verifier_give_a_terraform_login_token_listed_with_the_others(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    verifier, challenge = pkce()
    check = await client.get("/api/v1/cli-login/check", params=asked(challenge))
    assert check.status_code == 200, check.text
    code = await code_for(client, tenant, challenge)
    response = await exchange(client, code, verifier)
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert body["token_type"] == "bearer"
    issued = {"Authorization": f"Bearer {body['access_token']}"}
    me = await client.get("/api/v2/account/details", headers=issued)
    assert me.json()["data"]["attributes"]["email"] == tenant.email
    query = "{ viewer { tokens { id name } } }"
    listed = await client.post(
        "/graphql",
        content=json.dumps({"query": query}),
        headers={**tenant.headers, "Content-Type": "application/json"},
    )
    assert "terraform login" in [t["name"] for t in listed.json()["data"]["viewer"]["tokens"]], listed.text
    async with ctx.db.read() as session:
        stored = list(await session.scalars(select(CliLoginCode.code_hash)))
        actions = list(await session.scalars(select(AuditEntry.action)))
    assert code not in stored and len(stored) == 1  # only its hash
    assert "token.create" in actions


async def test_a_code_used_twice_is_refused_and_the_token_it_gave_is_revoked(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    verifier, challenge = pkce()
    code = await code_for(client, tenant, challenge)
    first = await exchange(client, code, verifier)
    assert first.status_code == 200, first.text
    again = await exchange(client, code, verifier)
    assert "already used" in refused(again, "invalid_grant")
    issued = {"Authorization": f"Bearer {first.json()['access_token']}"}
    assert (await client.get("/api/v2/account/details", headers=issued)).status_code == 401


async def test_a_wrong_verifier_spends_the_code(client: httpx.AsyncClient, tenant: Tenant) -> None:
    verifier, challenge = pkce()
    code = await code_for(client, tenant, challenge)
    other, _ = pkce()
    assert "code_verifier does not match" in refused(await exchange(client, code, other), "invalid_grant")
    # The right verifier comes too late: a guessed one had its one try.
    assert "already used" in refused(await exchange(client, code, verifier), "invalid_grant")


async def test_an_expired_code_is_refused(client: httpx.AsyncClient, tenant: Tenant, ctx: Context) -> None:
    verifier, challenge = pkce()
    code = await code_for(client, tenant, challenge)
    async with ctx.db.transaction() as session:
        await session.execute(update(CliLoginCode).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert "expired" in refused(await exchange(client, code, verifier), "invalid_grant")


async def test_a_code_is_bound_to_its_redirect_uri(client: httpx.AsyncClient, tenant: Tenant) -> None:
    verifier, challenge = pkce()
    code = await code_for(client, tenant, challenge)
    moved = await exchange(client, code, verifier, redirect_uri="http://localhost:10004/login")
    assert "redirect_uri" in refused(moved, "invalid_grant")


@pytest.mark.parametrize(
    ("changes", "error", "status"),
    [
        ({"grant_type": "password"}, "unsupported_grant_type", 400),
        ({"grant_type": None}, "unsupported_grant_type", 400),
        ({"client_id": "someone-else"}, "invalid_client", 401),
        ({"client_id": None}, "invalid_client", 401),
        ({"code": None}, "invalid_request", 400),
        ({"code": "flc_not-a-code"}, "invalid_grant", 400),
        ({"code_verifier": None}, "invalid_request", 400),
        ({"code_verifier": "short"}, "invalid_request", 400),
        ({"code_verifier": "é" * 50}, "invalid_request", 400),
    ],
)
async def test_bad_token_requests(
    client: httpx.AsyncClient, tenant: Tenant, changes: dict[str, str | None], error: str, status: int
) -> None:
    verifier, challenge = pkce()
    code = await code_for(client, tenant, challenge)
    refused(await exchange(client, code, verifier, **changes), error, status)


@pytest.mark.parametrize(
    "body",
    [b"", b"\xff\xfe not utf-8", b"grant_type=authorization_code&grant_type=authorization_code", b"x" * 9000],
)
async def test_broken_token_bodies(client: httpx.AsyncClient, body: bytes) -> None:
    response = await client.post(TOKEN, content=body, headers=FORM)
    if len(body) > 8 * 1024:  # refused unread, as any anonymous body over its cap
        assert response.status_code == 413, response.text
        return
    assert response.status_code == 400, response.text
    assert response.json()["error"] in ("invalid_request", "unsupported_grant_type")


async def test_a_json_token_request_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post(
        TOKEN, content=b'{"grant_type": "authorization_code"}', headers={"Content-Type": "application/json"}
    )
    refused(response, "invalid_request")


@pytest.mark.parametrize(
    ("changes", "error", "words"),
    [
        ({"client_id": "evil-cli"}, "invalid_client", "Unknown client"),
        ({"client_id": None}, "invalid_client", "Unknown client"),
        ({"redirect_uri": "http://evil.example.com:10003/login"}, "invalid_request", "not allowed"),
        ({"redirect_uri": "https://localhost:10003/login"}, "invalid_request", "not allowed"),
        ({"redirect_uri": "http://localhost:10003/elsewhere"}, "invalid_request", "not allowed"),
        ({"redirect_uri": "http://localhost:10003/login?next=x"}, "invalid_request", "not allowed"),
        ({"redirect_uri": "http://user@localhost:10003/login"}, "invalid_request", "not allowed"),
        ({"redirect_uri": "http://localhost:9999/login"}, "invalid_request", "outside the login ports"),
        ({"redirect_uri": "http://localhost:10011/login"}, "invalid_request", "outside the login ports"),
        ({"redirect_uri": "http://localhost/login"}, "invalid_request", "outside the login ports"),
        ({"redirect_uri": "http://localhost:99999999/login"}, "invalid_request", "not an address"),
        ({"redirect_uri": None}, "invalid_request", "missing"),
        ({"response_type": "token"}, "unsupported_response_type", "response_type=code"),
        ({"code_challenge_method": "plain"}, "invalid_request", "S256"),
        ({"code_challenge_method": None}, "invalid_request", "S256"),
        ({"code_challenge": "too-short"}, "invalid_request", "43 base64url"),
        ({"state": "s" * 501}, "invalid_request", "state"),
    ],
)
async def test_bad_authorization_requests_are_told_not_redirected(
    client: httpx.AsyncClient, tenant: Tenant, changes: dict[str, Any], error: str, words: str
) -> None:
    _, challenge = pkce()
    check = await client.get("/api/v1/cli-login/check", params=asked(challenge, **changes))
    assert words in refused(check, error)
    decided = await allow(client, tenant, challenge, **changes)
    assert words in refused(decided, error)
    assert "redirect" not in decided.json()


async def test_deny_sends_access_denied_back_to_the_cli(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    _, challenge = pkce()
    body = {**asked(challenge), "allow": False}
    response = await client.post(
        f"/api/v1/orgs/{tenant.org}/cli-login", content=json.dumps(body), headers=tenant.headers
    )
    assert response.status_code == 200, response.text
    query = parse_qs(urlsplit(response.json()["redirect"]).query)
    assert query["error"] == ["access_denied"] and query["state"] == ["the-cli-state"] and "code" not in query
    async with ctx.db.read() as session:
        assert list(await session.scalars(select(CliLoginCode.id))) == []


async def test_the_decision_needs_a_member_of_the_organization(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    _, challenge = pkce()
    body = json.dumps({**asked(challenge), "allow": True})
    anonymous = await client.post(f"/api/v1/orgs/{tenant.org}/cli-login", content=body)
    assert anonymous.status_code == 401, anonymous.text
    elsewhere = await client.post("/api/v1/orgs/not-mine/cli-login", content=body, headers=tenant.headers)
    assert elsewhere.status_code in (403, 404), elsewhere.text
    no_choice = await client.post(
        f"/api/v1/orgs/{tenant.org}/cli-login", content=json.dumps(asked(challenge)), headers=tenant.headers
    )
    refused(no_choice, "invalid_request")


async def test_revoking_the_terraform_login_token_ends_it(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    verifier, challenge = pkce()
    token = (await exchange(client, await code_for(client, tenant, challenge), verifier)).json()[
        "access_token"
    ]
    async with ctx.db.read() as session:
        token_id = await session.scalar(select(ApiToken.id).where(ApiToken.name == "terraform login"))
    mutation = "mutation($org: String!, $id: ID!) { revokeToken(org: $org, id: $id) { __typename } }"
    revoked = await client.post(
        "/graphql",
        content=json.dumps({"query": mutation, "variables": {"org": tenant.org, "id": token_id}}),
        headers={**tenant.headers, "Content-Type": "application/json"},
    )
    assert revoked.json()["data"]["revokeToken"]["__typename"] == "Token", revoked.text
    assert (
        await client.get("/api/v2/account/details", headers={"Authorization": f"Bearer {token}"})
    ).status_code == 401
