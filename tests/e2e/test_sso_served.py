"""Single sign-on against a real OpenID Connect provider (oidc-provider-mock, its own process):
the sign-in, the mapping of the provider's groups at each sign-in, the ID tokens and callbacks
that are refused, the session cookie's CSRF token, sign-out, and sessions beside tokens."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import InvalidStatus

from conftest import LiveServer, Tenant, free_port
from firstlume.api.session_cookie import COOKIE
from support.graphql_ws import GraphQLWebSocket, Rejected, ws_url
from support.oidc_provider import Provider, running_provider
from support.sso import served_with_sso, session_of, sign_in, to_provider

O = "/api/v1/orgs/acme"
MAPPING = {
    "groups": {
        "platform-sre": {"role": "operator", "groups": ["sre"]},
        "platform-admins": {"role": "admin", "groups": []},
    },
    "default_role": None,
}


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    """One provider for the module's tests (each starts a control plane of its own, which reads the
    provider's keys afresh): a test sets the users it signs in as, and a tampered token response
    is taken by the very next sign-in, the test's own."""
    log = tmp_path_factory.mktemp("oidc-provider") / "provider.log"
    with running_provider(free_port(), log) as running:
        yield running


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant, provider: Provider) -> Iterator[LiveServer]:
    with served_with_sso(database_url, tmp_path, provider) as served:
        yield served


async def _csrf(http: httpx.AsyncClient) -> str:
    answer = await http.get("/api/v1/session")
    assert answer.status_code == 200, answer.text
    return str(answer.json()["csrf_token"])


async def _members(server: LiveServer, tenant: Tenant) -> dict[str, dict[str, object]]:
    async with httpx.AsyncClient(base_url=server.url, headers=tenant.headers) as admin:
        listed = (await admin.get(f"{O}/members")).json()["members"]
    return {m["email"]: m for m in listed}


async def test_sign_in_gives_the_mapped_role_and_groups_and_follows_the_directory(
    server: LiveServer, provider: Provider, tenant: Tenant
) -> None:
    async with httpx.AsyncClient(base_url=server.url, headers=tenant.headers) as admin:
        put = await admin.put(f"{O}/sso", json=MAPPING)
        assert put.status_code == 200, put.text
        assert (await admin.get(f"{O}/sso")).json() == MAPPING
        offered = (await admin.get("/api/v1/sso")).json()
        assert offered == {"enabled": True, "issuer": provider.url, "sign_in_url": "/api/v1/sso/login"}

    provider.set_user("alice", {"email": "alice@example.com", "groups": ["platform-sre", "unrelated"]})
    async with httpx.AsyncClient(base_url=server.url) as browser:
        back = await sign_in(browser, provider.url, "alice")
        assert back.status_code == 302 and back.headers["location"] == "/", back.text
        cookie = back.headers["set-cookie"]
        assert f"{COOKIE}=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
        assert "Secure" not in cookie  # plain HTTP here; Secure under HTTPS
        orgs = (await browser.get("/api/v1/orgs")).json()
        assert [o["slug"] for o in orgs["organizations"]] == ["acme"], orgs
    assert (await _members(server, tenant))["alice@example.com"] == {
        "email": "alice@example.com",
        "role": "operator",
        "groups": ["sre"],
    }

    # The directory changes: alice leaves platform-sre; at her next sign-in she is no member.
    provider.set_user("alice", {"email": "alice@example.com", "groups": ["unrelated"]})
    async with httpx.AsyncClient(base_url=server.url) as browser:
        back = await sign_in(browser, provider.url, "alice")
        assert back.status_code == 302, back.text
        assert (await browser.get("/api/v1/orgs")).json()["organizations"] == []
        assert (await browser.get(f"{O}/stacks")).status_code == 404
    assert "alice@example.com" not in await _members(server, tenant)

    # An admin group gives admin.
    provider.set_user("alice", {"email": "alice@example.com", "groups": ["platform-admins", "platform-sre"]})
    async with httpx.AsyncClient(base_url=server.url) as browser:
        await sign_in(browser, provider.url, "alice")
    assert (await _members(server, tenant))["alice@example.com"]["role"] == "admin"


@pytest.mark.parametrize(
    ("given", "back"),
    [
        ("/cli-login?client_id=terraform-cli&state=a%20b", "/cli-login?client_id=terraform-cli&state=a%20b"),
        ("//evil.example.com/x", "/"),
        ("https://evil.example.com/x", "/"),
        ("/\\evil.example.com", "/"),
    ],
)
async def test_sign_in_returns_to_the_page_that_asked_for_it_on_this_site_only(
    server: LiveServer, provider: Provider, tenant: Tenant, given: str, back: str
) -> None:
    provider.set_user("carol", {"email": "carol@example.com", "groups": []})
    async with httpx.AsyncClient(base_url=server.url) as browser:
        callback = await to_provider(browser, provider.url, "carol", {"next": given})
        answered = await browser.get(callback)
        assert answered.status_code == 302, answered.text
        assert answered.headers["location"] == back


@pytest.mark.parametrize("mode", ["expired", "wrong_audience", "wrong_nonce", "other_key", "forged"])
async def test_an_untrustworthy_id_token_is_refused_and_makes_no_session(
    server: LiveServer, provider: Provider, tenant: Tenant, mode: str
) -> None:
    provider.set_user("bob", {"email": "bob@example.com", "groups": []})
    async with httpx.AsyncClient(base_url=server.url) as browser:
        provider.tamper(mode)
        refused = await sign_in(browser, provider.url, "bob")
        assert refused.status_code == 401, refused.text
        error = refused.json()["error"]
        assert error["code"] == "sign_in_refused"
        assert "no session was made" in error["message"]
        assert session_of(browser) is None and "set-cookie" not in refused.headers
        # The same provider, untouched, signs bob in: only the altered token was refused.
        assert (await sign_in(browser, provider.url, "bob")).status_code == 302
        assert session_of(browser) is not None


async def test_a_wrong_state_or_a_replayed_code_is_refused_and_the_rotated_key_is_followed(
    server: LiveServer, provider: Provider, tenant: Tenant
) -> None:
    provider.set_user("bob", {"email": "bob@example.com", "groups": []})
    async with httpx.AsyncClient(base_url=server.url) as browser:
        callback = await to_provider(browser, provider.url, "bob")
        wrong = callback.replace("state=", "state=x")
        refused = await browser.get(wrong)
        assert refused.status_code == 401 and "state" in refused.json()["error"]["message"], refused.text
        assert session_of(browser) is None
        # A callback finished in another browser (without the state cookie of this one).
        async with httpx.AsyncClient(base_url=server.url) as other:
            assert (await other.get(callback)).status_code == 401
        first = await browser.get(callback)
        assert first.status_code == 302, first.text
        browser.cookies.clear()
        # The same callback again: its sign-in was taken.
        replayed = await browser.get(callback)
        assert replayed.status_code == 401, replayed.text
        # The code replayed in a new sign-in of this browser: the provider refuses it.
        fresh = await to_provider(browser, provider.url, "bob")
        old_code = callback.split("code=")[1].split("&")[0]
        new_code = fresh.split("code=")[1].split("&")[0]
        replayed = await browser.get(fresh.replace(new_code, old_code))
        assert replayed.status_code == 401, replayed.text
        assert "authorization code" in replayed.json()["error"]["message"]
        assert session_of(browser) is None

        # The provider rotates its key: the next sign-in still works (the key set is fetched again).
        before = provider.kid()
        provider.rotate()
        assert provider.kid() != before
        rotated = await sign_in(browser, provider.url, "bob")
        assert rotated.status_code == 302, rotated.text
        assert session_of(browser) is not None


async def test_cookie_writes_need_the_csrf_token_and_sign_out_ends_the_session_and_its_subscriptions(
    server: LiveServer, provider: Provider, tenant: Tenant
) -> None:
    async with httpx.AsyncClient(base_url=server.url, headers=tenant.headers) as admin:
        assert (await admin.put(f"{O}/sso", json=MAPPING)).status_code == 200
    provider.set_user("carol", {"email": "carol@example.com", "groups": ["platform-sre"]})
    async with httpx.AsyncClient(base_url=server.url) as browser:
        assert (await sign_in(browser, provider.url, "carol")).status_code == 302
        session = session_of(browser)
        assert session is not None
        csrf = await _csrf(browser)

        refused = await browser.post(f"{O}/tokens", json={"name": "laptop"})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_required"
        wrong = await browser.post(f"{O}/tokens", json={"name": "laptop"}, headers={"X-CSRF-Token": "0" * 64})
        assert wrong.status_code == 403
        made = await browser.post(f"{O}/tokens", json={"name": "laptop"}, headers={"X-CSRF-Token": csrf})
        assert made.status_code == 201, made.text
        graphql = await browser.post(
            "/graphql", json={"query": "{ viewer { email } }"}, headers={"X-CSRF-Token": csrf}
        )
        assert graphql.json()["data"]["viewer"]["email"] == "carol@example.com"
        assert (await browser.post("/graphql", json={"query": "{ viewer { email } }"})).status_code == 403
        # The session is not one of the person's API tokens.
        assert [t["name"] for t in (await browser.get(f"{O}/tokens")).json()["tokens"]] == ["laptop"]

        cookie = {"Cookie": f"{COOKIE}={session}"}
        # A page of another site cannot open a WebSocket with the session.
        with pytest.raises((Rejected, InvalidStatus)):
            async with GraphQLWebSocket.connect(
                ws_url(server.url), payload={}, headers={**cookie, "Origin": "https://evil.example"}
            ):
                pass
        async with GraphQLWebSocket.connect(ws_url(server.url), payload={}, headers=cookie) as ws:
            updates = await ws.subscribe('subscription { activeRuns(org: "acme") { id } }')
            first = await updates.next_payload(within=5)  # the active runs now: none
            assert first["data"]["activeRuns"] == [], first
            signed_out_at = time.monotonic()
            out = await browser.post("/api/v1/sso/logout", headers={"X-CSRF-Token": csrf})
            assert out.status_code == 204
            payload = await updates.next_payload(within=5)
            while "errors" not in payload:
                payload = await updates.next_payload(within=5 - (time.monotonic() - signed_out_at))
            assert time.monotonic() - signed_out_at < 5
            assert payload["errors"][0]["extensions"]["code"] == "unauthenticated", payload
        assert session_of(browser) is None
    # The cookie no longer works, even sent again by hand.
    async with httpx.AsyncClient(base_url=server.url, cookies={COOKIE: session}) as stale:
        assert (await stale.get("/api/v1/orgs")).status_code == 401


async def test_sessions_and_tokens_coexist_and_the_audit_trail_names_the_person_for_both(
    server: LiveServer, provider: Provider, tenant: Tenant
) -> None:
    async with httpx.AsyncClient(base_url=server.url, headers=tenant.headers) as admin:
        assert (await admin.put(f"{O}/sso", json=MAPPING)).status_code == 200
    provider.set_user("dave", {"email": "dave@example.com", "groups": ["platform-admins"]})
    async with httpx.AsyncClient(base_url=server.url) as browser:
        assert (await sign_in(browser, provider.url, "dave")).status_code == 302
        csrf = await _csrf(browser)
        made = await browser.post(f"{O}/tokens", json={"name": "ci"}, headers={"X-CSRF-Token": csrf})
        token = made.json()["token"]
    # The token dave made in the browser works for machines (the CLI, terraform login).
    async with httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as cli:
        assert (await cli.put(f"{O}/members/erin@example.com", json={"role": "reader"})).status_code == 200
    async with httpx.AsyncClient(base_url=server.url, headers=tenant.headers) as admin:
        entries = (await admin.get(f"{O}/audit", params={"actor": "dave@example.com"})).json()["entries"]
    actions = {e["action"] for e in entries}
    assert {"session.start", "token.create", "member.update"} <= actions, entries
    assert all(e["actor"] == "dave@example.com" for e in entries)
