"""Browser: a stack is renamed, moved, its Git credential replaced and removed, and deleted from its
settings page; a folder is renamed and, once empty, deleted from its page (issue 40, item 4).

Pinned to SQLite like the other browser tests: the API beneath runs on both databases elsewhere
(tests/test_deleting_things.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest
from playwright.sync_api import expect

from conftest import LiveServer, Tenant

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def test_a_stack_and_a_folder_are_renamed_moved_and_deleted_in_the_ui(
    ui: UI, server: LiveServer, tenant: Tenant
) -> None:
    api = f"{server.url}/api/v1/orgs/{tenant.org}"
    with httpx.Client(headers=tenant.headers, timeout=30) as http:
        made = http.post(
            f"{api}/stacks", json={"slug": "net", "repository": "file:///nowhere", "folder": "prod"}
        )
        assert made.status_code == 201, made.text
    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/stacks/net/settings")

    manage = page.get_by_role("form", name="Rename or move the stack")
    manage.get_by_label("Slug").fill("network")
    manage.get_by_label("Folder").fill("platform/core")
    manage.get_by_role("button", name="Save name and place").click()
    expect(page).to_have_url(f"{server.url}/orgs/{tenant.org}/stacks/network/settings")
    page.wait_for_load_state("networkidle")
    expect(page.locator(".crumbs")).to_contain_text("platform/core")
    ui.check_screen(page, "stack-manage")

    credentials = page.get_by_role("form", name="Git credentials")
    expect(page.get_by_test_id("git-auth")).to_have_text("The stack has no Git credential.")
    credentials.get_by_label("New value").fill("ghp_ui-secret")
    credentials.get_by_role("button", name="Replace credential").click()
    expect(page.get_by_test_id("git-auth")).to_contain_text("The stack has an HTTPS token")
    credentials.get_by_role("button", name="Remove credential").click()
    expect(page.get_by_test_id("git-auth")).to_have_text("The stack has no Git credential.")

    # The old folder is empty now: renamed, then deleted.
    page.goto(f"/orgs/{tenant.org}/folders/prod")
    folder = page.get_by_role("form", name="Rename or move the folder")
    folder.get_by_label("New path").fill("old-prod")
    folder.get_by_role("button", name="Rename or move").click()
    expect(page).to_have_url(f"{server.url}/orgs/{tenant.org}/folders/old-prod")
    # The page reads the folder at its new address: act once that read has settled.
    page.wait_for_load_state("networkidle")
    expect(page.get_by_role("heading", level=1)).to_contain_text("old-prod")
    page.get_by_role("button", name="Delete folder…").click()
    page.get_by_label("to confirm").fill("old-prod")
    page.get_by_role("button", name="Delete the folder").click()
    expect(page).to_have_url(f"{server.url}/orgs/{tenant.org}/stacks")
    expect(page.locator('[data-folder="old-prod"]')).to_have_count(0)

    # A folder that holds a stack is refused in words.
    page.goto(f"/orgs/{tenant.org}/folders/platform/core")
    page.get_by_role("button", name="Delete folder…").click()
    page.get_by_label("to confirm").fill("platform/core")
    page.get_by_role("button", name="Delete the folder").click()
    expect(page.get_by_role("alert")).to_contain_text("is not empty: it holds stack network")

    page.goto(f"/orgs/{tenant.org}/stacks/network/settings")
    page.get_by_role("button", name="Delete stack…").click()
    # Undo-free: the button waits for the stack's slug to be typed.
    expect(page.get_by_role("button", name="Delete the stack")).to_be_disabled()
    page.get_by_label("to confirm").fill("network")
    page.get_by_role("button", name="Delete the stack").click()
    expect(page).to_have_url(f"{server.url}/orgs/{tenant.org}/stacks")
    expect(page.locator('[data-stack="network"]')).to_have_count(0)
    with httpx.Client(headers=tenant.headers, timeout=30) as http:
        [kept] = http.get(f"{api}/deleted-stacks").json()["stacks"]
    assert kept["slug"] == "network"
    assert ui.close() == []
