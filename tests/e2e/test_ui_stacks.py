"""Browser: the folder tree and its stacks, a stack's runs, and settings and variables at the
organization, a folder and a stack, with inheritance shown where it comes from.

Pinned to SQLite: the browser tests exercise the UI, and the API beneath them already runs on
both databases in the rest of the suite; one dialect keeps these slower tests fast."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import Page, expect

from conftest import LiveServer, Tenant
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform

if TYPE_CHECKING:
    from support.browser import UI

# The fixture `ui`.
pytest_plugins = ["support.browser"]
pytestmark = [requires_terraform, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

MAIN = """
resource "terraform_data" "a" { input = "a" }
resource "terraform_data" "b" { input = "b" }
"""


def setting(page: Page, name: str):
    return page.locator(f'[data-setting="{name}"]')


def save_rules(page: Page) -> None:
    """Save the approval rules picked, through the confirmation."""
    page.get_by_role("button", name="Save approval rules").click()
    page.get_by_test_id("confirm-change").get_by_role("button", name="Save").click()
    expect(page.locator(".approval-rules").get_by_test_id("saved")).to_have_text("✓ Saved")


def test_folders_and_stacks_are_created_in_the_tree_and_show_their_last_run(
    ui: UI, server: LiveServer, tenant: Tenant, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, MAIN)
    page = ui.open()
    ui.sign_in(page, tenant.token)
    expect(page.get_by_text("No stacks yet.")).to_be_visible()

    page.get_by_role("button", name="New folder").click()
    page.get_by_label("Path").fill("prod/eu")
    page.get_by_role("button", name="Create folder").click()
    expect(page.locator('[data-folder="prod"]')).to_be_visible()
    expect(page.locator('[data-folder="prod/eu"]')).to_be_visible()

    page.get_by_role("button", name="New stack").click()
    page.get_by_label("Slug").fill("network")
    page.get_by_label("Repository").fill(repo.url)
    page.get_by_label("Path (optional)").fill(repo.subdir)
    page.get_by_label("Folder (optional)").fill("prod/eu")
    page.get_by_role("button", name="Create stack").click()
    expect(page).to_have_url(f"{server.url}/orgs/{tenant.org}/stacks/network")
    expect(page.get_by_text("No runs yet.")).to_be_visible()

    # A second stack with the same slug is refused in words.
    page.goto(f"/orgs/{tenant.org}/stacks")
    page.get_by_role("button", name="New stack").click()
    page.get_by_label("Slug").fill("network")
    page.get_by_label("Repository").fill(repo.url)
    page.get_by_role("button", name="Create stack").click()
    expect(page.get_by_role("alert")).to_contain_text("network")
    page.get_by_role("button", name="Cancel").click()

    page.locator('[data-stack="network"]').get_by_role("link").click()
    page.get_by_role("button", name="Plan", exact=True).click()
    expect(page.get_by_test_id("run-status")).to_have_text("planned")
    expect(page.get_by_test_id("summary")).to_have_text("2 create")
    expect(page.get_by_test_id("commit")).to_contain_text("Initial stack")
    expect(page.get_by_test_id("commit")).to_contain_text("Ada Lovelace <ada@example.com>")

    page.get_by_role("link", name="network").click()
    row = page.locator("tr[data-run-id]").first
    expect(row).to_contain_text("#1")
    expect(row).to_contain_text("planned")
    expect(row).to_contain_text("plan")
    expect(row).to_contain_text("Initial stack")
    expect(row).to_contain_text(tenant.email)
    expect(row).to_contain_text("2 create")
    ui.screenshot(page, "stack")

    page.get_by_role("link", name="Stacks").first.click()
    last = page.locator('[data-stack="network"]').get_by_test_id("last-run")
    expect(last).to_contain_text("planned")
    expect(last).to_contain_text("#1")
    ui.screenshot(page, "stacks")


def test_a_stack_lists_runs_newest_first_with_queue_positions_and_cancels_only_queued_runs(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, tmp_path: Path
) -> None:
    api.create_stack("web", make_stack_repo(tmp_path, MAIN))
    holder = api.start("web", "apply")
    api.wait(holder, "awaiting_approval")
    queued = [api.start("web", "plan"), api.start("web", "drift")]

    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/stacks/web")
    rows = page.locator("tr[data-run-id]")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("#3")
    expect(rows.nth(0)).to_contain_text("position 2")
    expect(rows.nth(1)).to_contain_text("position 1")
    expect(rows.nth(2)).to_contain_text("awaiting approval")
    expect(rows.nth(2)).to_have_class(re.compile("attention"))

    # Canceling the first in line moves the other up, live.
    page.locator(f'tr[data-run-id="{queued[0]}"]').get_by_role("link").click()
    page.get_by_role("button", name="Cancel run").click()
    expect(page.get_by_test_id("run-status")).to_have_text("canceled")
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
    page.go_back()
    expect(page.locator(f'tr[data-run-id="{queued[1]}"]')).to_contain_text("position 1")
    expect(page.locator(f'tr[data-run-id="{queued[0]}"]')).to_contain_text("canceled")

    # A run that is awaiting approval cannot be canceled: no button.
    page.locator(f'tr[data-run-id="{holder}"]').get_by_role("link").click()
    expect(page.get_by_test_id("run-status")).to_have_text("awaiting approval")
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)


def test_settings_show_the_inherited_value_and_its_origin_and_can_be_set_and_cleared(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, tmp_path: Path
) -> None:
    api.create_stack("db", make_stack_repo(tmp_path, MAIN), folder="prod/eu")
    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/settings")

    confirm = setting(page, "confirm_destructive")
    expect(confirm.get_by_test_id("effective")).to_have_text("Effective here: off inherited from default")
    confirm.get_by_role("radio", name="On").click()
    save_rules(page)
    expect(confirm.get_by_test_id("effective")).to_have_text("Effective here: on set on the organization")
    ui.screenshot(page, "org-settings")

    page.goto(f"/orgs/{tenant.org}/folders/prod/eu")
    approval = setting(page, "require_approval")
    confirm = setting(page, "confirm_destructive")
    expect(confirm.get_by_test_id("effective")).to_have_text("Effective here: on inherited from organization")
    approval.get_by_role("radio", name="Off").click()
    save_rules(page)
    expect(approval.get_by_test_id("effective")).to_have_text("Effective here: off set on this folder")

    page.goto(f"/orgs/{tenant.org}/stacks/db/settings")
    approval = setting(page, "require_approval")
    confirm = setting(page, "confirm_destructive")
    expect(approval.get_by_test_id("effective")).to_have_text(
        "Effective here: off inherited from folder prod/eu"
    )
    expect(approval.get_by_role("radio", name="Inherit")).to_have_attribute("aria-checked", "true")
    confirm.get_by_role("radio", name="Off").click()
    save_rules(page)
    expect(confirm.get_by_test_id("effective")).to_have_text("Effective here: off set on this stack")
    confirm.get_by_role("radio", name="Inherit").click()
    save_rules(page)
    expect(confirm.get_by_test_id("effective")).to_have_text("Effective here: on inherited from organization")

    # Variables: a sensitive value is write-only; the inherited ones show where they come from.
    api.put_variable("/folders/prod", "region", {"value": "eu-west-1"})
    api.put_variable("/folders/prod", "zones", {"value": ["a", "b"]})
    page.reload()
    variables = page.get_by_test_id("variables")
    expect(variables.locator('[data-variable="region"]')).to_contain_text("inherited from folder prod")
    # A value that is not a string reads as the JSON it was set as.
    expect(variables.locator('[data-variable="zones"]')).to_contain_text('["a","b"]')
    page.get_by_label("Variable name").fill("db_password")
    page.get_by_label("sensitive").check()
    page.get_by_label("Variable value").fill("pa55-never-shown")
    page.get_by_role("button", name="Set variable").click()
    expect(variables.locator('[data-variable="db_password"]')).to_contain_text("hidden (write-only)")
    page.get_by_label("Variable name").fill("region")
    page.get_by_label("sensitive").uncheck()
    page.get_by_label("Variable value").fill("eu-central-1")
    page.get_by_role("button", name="Set variable").click()
    expect(variables.locator('[data-variable="region"]')).to_have_count(1)
    expect(variables.locator('[data-variable="region"]')).to_contain_text("eu-central-1")
    expect(variables.locator('[data-variable="region"]')).to_contain_text("here")
    ui.screenshot(page, "stack-settings")
    page.reload()
    expect(variables.locator('[data-variable="db_password"]')).to_be_visible()
    assert "pa55-never-shown" not in page.content()

    variables.get_by_role("button", name="Delete region").click()
    variables.get_by_test_id("confirm-delete").get_by_role("button", name="Delete the variable").click()
    expect(variables.locator('[data-variable="region"]')).to_contain_text("inherited from folder prod")


@pytest.fixture
def fleet(api: Api, tmp_path: Path) -> dict[str, str]:
    """app (in prod): applied, another apply awaiting approval; edge (in dev, a push plans) and
    idle (no folder, a push applies): never applied."""
    app = make_stack_repo(tmp_path / "app", MAIN)
    api.create_stack("app", app, folder="prod")
    api.create_stack("edge", make_stack_repo(tmp_path / "edge", MAIN), folder="dev", trigger="plan")
    api.create_stack("idle", make_stack_repo(tmp_path / "idle", MAIN), trigger="apply")
    first = api.start("app", "apply")
    api.wait(first, "awaiting_approval")
    api.approve(first)
    api.wait(first, "applied")
    app.commit({"main.tf": MAIN + 'resource "terraform_data" "c" { input = "c" }\n'}, "Add c")
    waiting = api.start("app", "apply")
    api.wait(waiting, "awaiting_approval")
    return {"applied": first, "waiting": waiting}


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_stacks_list_shows_where_each_stack_stands_and_filters_by_name_status_folder_trigger(
    ui: UI, server: LiveServer, tenant: Tenant, fleet: dict[str, str], size: str
) -> None:
    page = ui.open(ui.sizes[size])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/stacks")
    stacks = page.locator("[data-stack]")
    # The last apply's outcome and what awaits people, not the newest run (awaiting approval).
    expect(page.locator('[data-stack="app"]').get_by_test_id("stack-summary")).to_have_text(
        "applied · 1 awaiting approval"
    )
    expect(page.locator('[data-stack="idle"]').get_by_test_id("stack-summary")).to_have_text("never applied")
    expect(stacks).to_have_count(3)
    ui.check_screen(page, f"{size}-stacks-summary")

    page.get_by_label("Search stacks by name").fill("ED")
    expect(stacks).to_have_count(1)
    expect(page.locator('[data-stack="edge"]')).to_be_visible()
    expect(page).to_have_url(re.compile(r"[?&]q=ED"))
    page.get_by_label("Search stacks by name").fill("")

    page.get_by_label("Filter stacks by status").select_option(label="Awaiting approval")
    expect(stacks).to_have_count(1)
    expect(page.locator('[data-stack="app"]')).to_be_visible()
    expect(page.get_by_test_id("stack-matches")).to_have_text("1 of 3 stacks")
    page.get_by_label("Filter stacks by status").select_option(label="Never applied")
    expect(stacks).to_have_count(2)

    page.get_by_label("Filter stacks by folder").select_option(label="dev")
    expect(stacks).to_have_count(1)
    expect(page.locator('[data-stack="edge"]')).to_be_visible()
    expect(page.locator('[data-folder="prod"]')).to_have_count(0)
    page.get_by_label("Filter stacks by folder").select_option(label="In no folder")
    page.get_by_label("Filter stacks by trigger").select_option(label="A push applies")
    expect(stacks).to_have_count(1)
    expect(page.locator('[data-stack="idle"]')).to_be_visible()
    ui.check_screen(page, f"{size}-stacks-filtered")

    # The filters live in the address: a reload (or a shared link) shows the same list.
    page.reload()
    expect(page.get_by_label("Filter stacks by trigger")).to_have_value("apply")
    expect(page.get_by_label("Filter stacks by status")).to_have_value("never")
    expect(stacks).to_have_count(1)
    page.get_by_label("Filter stacks by trigger").select_option(label="A push plans")
    expect(page.get_by_text("No stack matches these filters.")).to_be_visible()
    assert ui.close() == []
