"""Browser: "Sign in with …" → the OpenID Connect provider (oidc-provider-mock, its own process)
→ back signed in with the role and groups the mapping gives; a group change at the provider at
the next sign-in (an approver removed from sre can no longer approve); a person mapped to
nothing sees no organization; the stack's viewer_role (folder grants) drives disabled buttons.

Pinned to SQLite, as the other browser tests (test_ui_sign_in.py says why)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from playwright.sync_api import Page, expect

from conftest import (
    LiveServer,
    Tenant,
    free_port,
    make_stack,
)
from firstlume.services.context import Context
from support.oidc_provider import Provider, running_provider
from support.runs import plan_run, start
from support.sso import served_with_sso
from test_graphql_api import synthetic_plan

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

O = "/api/v1/orgs/acme"
MAPPING = {
    "groups": {
        "platform-sre": {"role": "operator", "groups": ["sre"]},
        "network-team": {"role": "reader", "groups": ["net"]},
    },
    "default_role": None,
}


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[Provider]:
    with running_provider(free_port(), tmp_path / "provider.log") as running:
        yield running


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant, provider: Provider) -> Iterator[LiveServer]:
    with served_with_sso(database_url, tmp_path, provider) as served:
        yield served


@pytest.fixture
async def world(ctx: Context, tenant: Tenant, server: LiveServer) -> str:
    """vpc in network/ (group:net operates it), web in prod/ (group:sre approves), the mapping,
    and a run of web awaiting approval (planned here: the served scheduler is off). Made before
    the browser starts (the `ui` fixture says why)."""
    await make_stack(ctx, tenant, {"slug": "vpc", "repository": "file:///r", "folder": "network"})
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///r", "folder": "prod"})
    async with httpx.AsyncClient(base_url=server.url, headers=tenant.headers) as admin:
        assert (await admin.put(f"{O}/sso", json=MAPPING)).status_code == 200
        grants = await admin.put(f"{O}/folders/network/grants", json={"grants": {"group:net": "operator"}})
        assert grants.status_code == 200, grants.text
        rules = {"require_approval": True, "approvers": ["group:sre"]}
        assert (await admin.patch(f"{O}/folders/prod/settings", json=rules)).status_code == 200
    run_id = await start(ctx, tenant.token, "acme", "web", "apply")
    assert await plan_run(ctx, synthetic_plan()) == {run_id: "awaiting_approval"}
    return run_id


def _sign_in(page: Page, provider: Provider, sub: str) -> None:
    page.goto("/")
    page.get_by_role("link", name=f"Sign in with {provider.url}").click()
    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible()
    page.locator("input[name=sub]").fill(sub)
    page.get_by_role("button", name="Authorize").click()


def test_sign_in_with_the_provider_follows_the_directory_and_viewer_role_disables_buttons(
    world: str, ui: UI, server: LiveServer, provider: Provider
) -> None:
    provider.set_user("alice", {"email": "alice@example.com", "groups": ["platform-sre"]})
    provider.set_user("nat", {"email": "nat@example.com", "groups": ["network-team"]})
    provider.set_user("mo", {"email": "mo@example.com", "groups": ["marketing"]})

    # alice: an operator in sre, so an approver of web's run.
    page = ui.open()
    _sign_in(page, provider, "alice")
    expect(page).to_have_url(f"{server.url}/orgs/acme/stacks")
    expect(page.get_by_text("alice@example.com")).to_be_visible()
    page.goto(f"/orgs/acme/runs/{world}")
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_enabled()
    ui.screenshot(page, "sso-approver")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("link", name=f"Sign in with {provider.url}")).to_be_visible()

    # The directory moves alice out of platform-sre: at her next sign-in she may not approve.
    provider.set_user(
        "alice", {"email": "alice@example.com", "groups": ["platform-sre-alumni", "network-team"]}
    )
    _sign_in(page, provider, "alice")
    expect(page).to_have_url(f"{server.url}/orgs/acme/stacks")
    page.goto(f"/orgs/acme/runs/{world}")
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_disabled()
    expect(page.get_by_test_id("cannot-approve")).to_be_visible()

    # nat: a reader of the organization, an operator of network/ through group:net.
    other = ui.open()
    _sign_in(other, provider, "nat")
    other.goto("/orgs/acme/stacks/vpc")
    expect(other.get_by_role("button", name="Plan", exact=True)).to_be_enabled()
    other.goto("/orgs/acme/stacks/web")
    # A reader here: no Plan button at all (the server's viewerCan says so), and why.
    expect(other.get_by_test_id("cannot-start")).to_be_visible()
    expect(other.get_by_role("button", name="Plan", exact=True)).to_have_count(0)
    ui.screenshot(other, "sso-viewer-role")

    # mo: mapped to nothing, no member of any organization.
    third = ui.open()
    _sign_in(third, provider, "mo")
    expect(third.get_by_text("mo@example.com belongs to no organization.")).to_be_visible()
    assert ui.close() == []
