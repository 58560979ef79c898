"""The single sign-on mapping of each organization: set and read by admins only (audited), bad
input refused, and applied at each sign-in: the member's role and groups follow the IdP's groups,
and a person mapped to nothing is no member. (The protocol itself: tests/e2e/test_sso_served.py.)"""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select
from starlette.applications import Starlette

from conftest import Tenant, make_tenant
from firstlume.api.session_cookie import COOKIE
from firstlume.db.models import ApiToken, Organization
from firstlume.domain.errors import Unauthenticated
from firstlume.domain.sso import GroupMapping, mapped_membership
from firstlume.services import accounts
from firstlume.services.access import sessions, sso_mapping
from firstlume.services.access.members import list_members
from firstlume.services.accounts import ensure_user
from firstlume.services.context import Actor, Context

O = "/api/v1/orgs/acme"
MAPPING = {
    "groups": {
        "platform-sre": {"role": "operator", "groups": ["sre"]},
        "dba": {"role": "reader", "groups": ["dba"]},
        "platform-admins": {"role": "admin", "groups": []},
    },
    "default_role": None,
}


def test_the_highest_role_and_every_group_of_the_idp_groups_are_given() -> None:
    mapping = {
        "sre": GroupMapping("operator", ("sre",)),
        "dba": GroupMapping("reader", ("dba",)),
        "boss": GroupMapping("admin"),
    }
    given = mapped_membership(mapping, None, ["dba", "sre", "other"])
    assert given is not None and (given.role, given.groups) == ("operator", ("dba", "sre"))
    assert mapped_membership(mapping, None, ["other"]) is None
    fallback = mapped_membership(mapping, "reader", [])
    assert fallback is not None and (fallback.role, fallback.groups) == ("reader", ())


async def _sign_in(ctx: Context, email: str, groups: list[str]) -> list[str]:
    async with ctx.unit() as unit:
        user = await ensure_user(unit.session, email)
        return await sso_mapping.apply_at_sign_in(unit.session, Actor(user.id, user.email), groups)


async def _roles(ctx: Context, org_id: str) -> dict[str, tuple[str, list[str]]]:
    async with ctx.db.read() as session:
        return {m.email: (m.role, m.groups) for m in await list_members(session, org_id)}


async def _org_id(ctx: Context, slug: str) -> str:
    async with ctx.db.read() as session:
        return str(await session.scalar(select(Organization.id).where(Organization.slug == slug)))


async def test_each_sign_in_sets_the_membership_the_mapping_gives(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    put = await client.put(f"{O}/sso", headers=tenant.headers, json=MAPPING)
    assert put.status_code == 200 and put.json() == MAPPING
    other = await make_tenant(ctx, "globex", "gus@example.com")  # no mapping: left alone
    acme = await _org_id(ctx, "acme")

    assert await _sign_in(ctx, "bob@example.com", ["platform-sre", "dba"]) == ["acme"]
    assert (await _roles(ctx, acme))["bob@example.com"] == ("operator", ["dba", "sre"])
    # The directory moved bob out of platform-sre: no longer an approver of group:sre.
    await _sign_in(ctx, "bob@example.com", ["dba"])
    assert (await _roles(ctx, acme))["bob@example.com"] == ("reader", ["dba"])
    # Out of every mapped group: no member any more.
    assert await _sign_in(ctx, "bob@example.com", ["marketing"]) == []
    assert "bob@example.com" not in await _roles(ctx, acme)
    assert "bob@example.com" not in await _roles(ctx, await _org_id(ctx, other.org))

    entries = (await client.get(f"{O}/audit", headers=tenant.headers)).json()["entries"]
    by_action = [(e["action"], e["target"], e["actor"]) for e in entries]
    assert ("sso.update", "organization:acme", "ada@example.com") in by_action
    assert ("member.update", "member:bob@example.com", "bob@example.com") in by_action
    assert ("member.remove", "member:bob@example.com", "bob@example.com") in by_action

    # A default role: everyone the provider signs in is a reader.
    with_default = {**MAPPING, "default_role": "reader"}
    assert (await client.put(f"{O}/sso", headers=tenant.headers, json=with_default)).status_code == 200
    assert await _sign_in(ctx, "bob@example.com", []) == ["acme"]
    assert (await _roles(ctx, acme))["bob@example.com"] == ("reader", [])


async def test_the_mapping_is_the_admins_and_bad_input_is_refused(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    h = tenant.headers
    assert (await client.get(f"{O}/sso", headers=h)).json() == {"groups": {}, "default_role": None}
    for body in (
        {"groups": {"sre": {"role": "boss"}}},
        {"groups": {"sre": {"role": "operator", "groups": ["no spaces"]}}},
        {"groups": ["sre"]},
        {"groups": {}, "default_role": "owner"},
        {"groups": {}, "extra": 1},
        {},
    ):
        refused = await client.put(f"{O}/sso", headers=h, json=body)
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_request", body
    assert (await client.get(f"{O}/sso", headers=h)).json() == {"groups": {}, "default_role": None}
    reader = await client.put(f"{O}/members/rita@example.com", headers=h, json={"role": "operator"})
    assert reader.status_code == 200
    async with ctx.unit() as unit:
        token = await accounts.create_token(unit.session, "acme", "rita@example.com")
    as_operator = {"Authorization": f"Bearer {token}"}
    for method in ("GET", "PUT"):
        answer = await client.request(method, f"{O}/sso", headers=as_operator, json=MAPPING)
        assert answer.status_code == 403 and answer.json()["error"]["needed"] == "admin"
    # Another organization's mapping is not found.
    await make_tenant(ctx, "globex", "gus@example.com")
    assert (await client.get("/api/v1/orgs/globex/sso", headers=h)).status_code == 404


async def test_a_session_expires_and_its_csrf_token_is_its_own(ctx: Context, tenant: Tenant) -> None:
    async with ctx.unit() as unit:
        user = await ensure_user(unit.session, "sue@example.com")
        actor = Actor(user.id, user.email)
        live = await sessions.start_session(unit.session, actor, timedelta(hours=1), {})
        expired = await sessions.start_session(unit.session, actor, timedelta(seconds=-1), {})
    async with ctx.db.read() as session:
        assert (await accounts.authenticate(session, live.token)).email == "sue@example.com"
        with pytest.raises(Unauthenticated):
            await accounts.authenticate(session, expired.token)
    assert sessions.csrf_token(live.token) != sessions.csrf_token(expired.token)
    assert sessions.csrf_matches(live.token, sessions.csrf_token(live.token))
    assert not sessions.csrf_matches(live.token, sessions.csrf_token(expired.token))
    assert not sessions.csrf_matches(live.token, None)
    # The session is stored hashed, never as the cookie's value.
    async with ctx.db.read() as session:
        stored = list(await session.scalars(select(ApiToken.token_hash).where(ApiToken.kind == "session")))
    assert len(stored) == 2 and live.token not in stored and expired.token not in stored


async def test_under_https_the_session_cookie_is_secure(app: Starlette, ctx: Context, tenant: Tenant) -> None:
    async with ctx.unit() as unit:
        user = await ensure_user(unit.session, "sue@example.com")
        started = await sessions.start_session(
            unit.session, Actor(user.id, user.email), timedelta(hours=1), {}
        )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://firstlume.example") as browser:
        browser.cookies.set(COOKIE, started.token, domain="firstlume.example")
        csrf = (await browser.get("/api/v1/session")).json()["csrf_token"]
        out = await browser.post("/api/v1/sso/logout", headers={"X-CSRF-Token": csrf})
        assert out.status_code == 204
        cleared = out.headers["set-cookie"]
        assert cleared.startswith(f"{COOKIE}=") and "Secure" in cleared and "HttpOnly" in cleared, cleared
        assert (await browser.get("/api/v1/session")).status_code == 401
