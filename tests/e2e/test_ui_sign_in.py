"""Browser: signing in with an API token, keeping it until sign-out, and deep links on reload.

Pinned to SQLite: the browser tests exercise the UI, and the API beneath them already runs on
both databases in the rest of the suite; one dialect keeps these slower tests fast."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from conftest import LiveServer, Tenant
from support.e2e import Api, make_stack_repo

if TYPE_CHECKING:
    from support.browser import UI

# The fixture `ui`.
pytest_plugins = ["support.browser"]
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def test_sign_in_refuses_a_wrong_token_in_words_then_keeps_the_right_one_until_sign_out(
    ui: UI, server: LiveServer, tenant: Tenant
) -> None:
    page = ui.open()
    page.goto("/")
    ui.screenshot(page, "sign-in")
    page.get_by_label("API token").fill("fl_not-a-real-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Your API token was not accepted")

    page.get_by_label("API token").fill(tenant.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Stacks")).to_be_visible()
    expect(page).to_have_url(f"{server.url}/orgs/{tenant.org}/stacks")
    expect(page.get_by_text(tenant.email)).to_be_visible()

    page.reload()
    expect(page.get_by_role("heading", name="Stacks")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API token")).to_be_visible()
    page.reload()
    expect(page.get_by_label("API token")).to_be_visible()


def test_a_deep_link_opens_its_screen_after_sign_in_and_on_reload(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, tmp_path
) -> None:
    api.create_stack("web", make_stack_repo(tmp_path, 'resource "terraform_data" "a" { input = "a" }\n'))
    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/stacks/web/settings")
    expect(page).to_have_url(f"{server.url}/orgs/{tenant.org}/stacks/web/settings")
    expect(page.get_by_role("heading", name="Approval rules")).to_be_visible()
    page.reload()
    expect(page.get_by_role("heading", name="Approval rules")).to_be_visible()

    page.goto(f"/orgs/{tenant.org}/runs/does-not-exist")
    expect(page.get_by_text("There is no such run in this organization.")).to_be_visible()
