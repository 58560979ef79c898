"""Browser: every screen at a laptop's size (1440×900), a phone's (390×844) and the narrowest the
UI is made for (360×740): nothing scrolls
sideways, axe-core finds no serious or critical accessibility violation, and a screenshot of each
is saved (test-artifacts/screenshots/<size>-<screen>.png). Also: titles per page, the active-runs
drawer on a phone, the folder tree by keyboard, an unknown organization.

Pinned to SQLite: the browser tests exercise the UI, and the API beneath them already runs on
both databases in the rest of the suite; one dialect keeps these slower tests fast."""

from __future__ import annotations

import re
from dataclasses import dataclass
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

BEFORE = """
resource "terraform_data" "gone" { input = "x" }
resource "terraform_data" "repl" {
  input            = "r"
  triggers_replace = ["v1"]
}
resource "terraform_data" "upd" { input = { name = "a", size = 1 } }
"""

AFTER = """
resource "terraform_data" "repl" {
  input            = "r"
  triggers_replace = ["v2"]
}
resource "terraform_data" "upd" { input = { name = "a", size = 2 } }
resource "terraform_data" "new" { input = "n" }
"""


@dataclass
class Runs:
    applied: str
    waiting: str


@pytest.fixture
def runs(api: Api, tmp_path: Path) -> Runs:
    """An applied run (with its log) and the next apply, awaiting approval with confirm_destructive."""
    repo = make_stack_repo(tmp_path, BEFORE, message="Queue and replica for the payments service")
    api.create_stack("payments-eu-west", repo, folder="prod/eu")
    api.create_stack(
        "network", make_stack_repo(tmp_path / "net", 'resource "terraform_data" "n" { input = "n" }\n')
    )
    api.settings("", {"require_approval": False})
    applied = api.start("payments-eu-west", "apply")
    api.wait(applied, "applied")
    api.settings("", {"require_approval": None})
    api.settings("/folders/prod", {"confirm_destructive": True})
    api.put_variable("/folders/prod", "region", {"value": "eu-west-1"})
    repo.commit({"main.tf": AFTER}, "Rotate the replica and retire the old queue")
    waiting = api.start("payments-eu-west", "apply")
    api.wait(waiting, "awaiting_approval")
    return Runs(applied=applied, waiting=waiting)


@pytest.mark.parametrize("size", ["desktop", "phone", "narrowest"])
def test_every_screen_fits_the_width_and_passes_axe(size: str, ui: UI, tenant: Tenant, runs: Runs) -> None:
    page = ui.open(ui.sizes[size])
    org = tenant.org
    page.goto("/")
    expect(page.get_by_label("API token")).to_be_visible()
    expect(page).to_have_title("Sign in · Firstlume")
    ui.check_screen(page, f"{size}-sign-in")

    ui.sign_in(page, tenant.token)
    expect(page.locator('[data-stack="payments-eu-west"]').get_by_test_id("last-run")).to_contain_text(
        "awaiting approval"
    )
    expect(page).to_have_title(f"Stacks · {org} · Firstlume")
    ui.check_screen(page, f"{size}-stacks")

    page.goto(f"/orgs/{org}/stacks/payments-eu-west")
    rows = page.locator("tr[data-run-id]")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("awaiting approval")
    expect(page).to_have_title("payments-eu-west · Stacks · Firstlume")
    # Every cell of the highlighted row spans the row exactly (no gap in the highlight), and the
    # changes and duration stay on one line.
    cells = rows.nth(0).evaluate(
        """row => [...row.cells].map(cell => {
            const r = cell.getBoundingClientRect(), t = row.getBoundingClientRect();
            const text = document.createRange();
            text.selectNodeContents(cell);
            const lineHeight = parseFloat(getComputedStyle(cell).lineHeight);
            return { label: cell.dataset.label, top: r.top - t.top, bottom: t.bottom - r.bottom,
                     oneLine: text.getBoundingClientRect().height < 1.5 * lineHeight };
        })"""
    )
    if size == "desktop":
        assert all(c["top"] == 0 and c["bottom"] == 0 for c in cells), cells
    unwrapped = {c["label"]: c["oneLine"] for c in cells if c["label"] in ("Changes", "Took")}
    assert unwrapped == {"Changes": True, "Took": True}, unwrapped
    ui.check_screen(page, f"{size}-stack")

    page.goto(f"/orgs/{org}/runs/{runs.waiting}")
    approval = page.get_by_test_id("approval")
    expect(approval).to_contain_text("confirm_destructive is on")
    expect(page.locator('[data-address="terraform_data.upd"]')).to_be_visible()
    expect(page).to_have_title("Run #2 · payments-eu-west · Stacks · Firstlume")
    ui.check_screen(page, f"{size}-run-approval")

    page.goto(f"/orgs/{org}/runs/{runs.applied}/logs")
    log = page.get_by_test_id("log")
    expect(page.get_by_test_id("log-state")).to_have_text("end of log")
    expect(log).to_contain_text("Apply complete!")
    expect(page).to_have_title("Run #1 · payments-eu-west · Stacks · Firstlume")
    ui.check_screen(page, f"{size}-run-applied-log")

    page.goto(f"/orgs/{org}/runs/{runs.applied}")
    expect(page.get_by_test_id("run-status")).to_have_text("applied")
    expect(page.locator('[data-address="terraform_data.upd"]')).to_have_attribute("data-state", "DONE")
    ui.check_screen(page, f"{size}-run-applied")

    page.goto(f"/orgs/{org}/settings")
    expect(page.get_by_role("heading", name="Approval rules")).to_be_visible()
    expect(page).to_have_title(f"Settings · {org} · Firstlume")
    ui.check_screen(page, f"{size}-settings")

    page.goto(f"/orgs/{org}/stacks/payments-eu-west/settings")
    variables = page.get_by_test_id("variables")
    expect(variables.locator('[data-variable="region"]')).to_contain_text("inherited from folder prod")
    ui.check_screen(page, f"{size}-stack-settings")

    page.goto(f"/orgs/{org}/audit")
    expect(page.get_by_test_id("audit-entry").filter(has_text="run.start")).to_have_count(2)
    expect(page).to_have_title(f"Audit · {org} · Firstlume")
    ui.check_screen(page, f"{size}-audit")


def test_on_a_phone_the_active_runs_are_a_header_button_and_a_drawer(
    ui: UI, tenant: Tenant, runs: Runs
) -> None:
    page = ui.open(ui.sizes["phone"])
    ui.sign_in(page, tenant.token)
    # No panel beside the page: it would leave the page no room.
    expect(page.get_by_test_id("active-runs")).to_be_hidden()
    button = page.get_by_test_id("active-runs-button")
    expect(button).to_have_accessible_name("Active runs: 1 run · 1 to approve")
    button.click()
    drawer = page.get_by_role("dialog", name="Active runs")
    expect(drawer).to_be_visible()
    entry = drawer.locator(f'li[data-run-id="{runs.waiting}"]')
    expect(entry).to_contain_text("awaiting approval")
    expect(entry).to_contain_text("Review →")
    ui.check_screen(page, "phone-active-runs-drawer")
    entry.get_by_role("link").click()
    expect(page.get_by_test_id("approval")).to_contain_text("This plan is waiting for approval")
    expect(drawer).to_be_hidden()

    # Navigation and signing out are in the menu.
    page.get_by_role("button", name="Menu").click()
    menu = page.locator("#account-menu")
    expect(menu.get_by_text(tenant.email)).to_be_visible()
    ui.check_screen(page, "phone-menu")
    menu.get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", name="Organization settings")).to_be_visible()
    page.get_by_role("button", name="Menu").click()
    menu.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API token")).to_be_visible()


def focused(page: Page) -> str:
    return page.evaluate(
        "() => { const el = document.activeElement;"
        " return el.dataset.folder ? 'folder:' + el.dataset.folder : el.dataset.stack ? 'stack:' + el.dataset.stack : el.tagName; }"
    )


def test_the_folder_tree_works_with_the_arrow_keys(
    ui: UI, server: LiveServer, tenant: Tenant, runs: Runs
) -> None:
    page = ui.open()
    ui.sign_in(page, tenant.token)
    tree = page.get_by_role("tree", name="Folders and stacks")
    expect(tree.get_by_role("treeitem")).to_have_count(4)  # prod, prod/eu, payments-eu-west, network
    # One tab stop: the first row.
    page.get_by_role("link", name="Firstlume", exact=True).focus()
    for _ in range(20):
        page.keyboard.press("Tab")
        if focused(page).startswith("folder:"):
            break
    assert focused(page) == "folder:prod"
    # The focus ring: 3 px of indigo (7.9:1 against the white rows, WCAG asks 3:1).
    ring = page.evaluate(
        "() => { const s = getComputedStyle(document.activeElement);"
        " return [s.outlineStyle, s.outlineWidth, s.outlineColor]; }"
    )
    assert ring == ["solid", "3px", "rgb(67, 56, 202)"], ring
    page.keyboard.press("ArrowDown")
    assert focused(page) == "folder:prod/eu"
    page.keyboard.press("ArrowRight")  # open already: into its first child
    assert focused(page) == "stack:payments-eu-west"
    page.keyboard.press("ArrowLeft")  # a stack: up to its folder
    assert focused(page) == "folder:prod/eu"
    page.keyboard.press("ArrowLeft")  # an open folder: closes it
    expect(page.locator('[data-folder="prod/eu"]')).to_have_attribute("aria-expanded", "false")
    expect(page.locator('[data-stack="payments-eu-west"]')).to_have_count(0)
    page.keyboard.press("ArrowDown")
    assert focused(page) == "stack:network"
    page.keyboard.press("Home")
    assert focused(page) == "folder:prod"
    page.keyboard.press("End")
    assert focused(page) == "stack:network"
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowRight")  # a closed folder: opens it
    expect(page.locator('[data-folder="prod/eu"]')).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("ArrowDown")
    assert focused(page) == "stack:payments-eu-west"
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/stacks/payments-eu-west$"))


def test_an_unknown_organization_is_a_not_found_page(ui: UI, tenant: Tenant) -> None:
    page = ui.open()
    ui.sign_in(page, tenant.token, "/orgs/no-such-org/stacks")
    expect(page.get_by_test_id("not-found")).to_contain_text("There is no organization “no-such-org”")
    expect(page).to_have_title("Not found · Firstlume")
    # Nothing to create there, and nothing waiting to connect.
    expect(page.get_by_role("button", name="New stack")).to_have_count(0)
    expect(page.get_by_role("button", name="New folder")).to_have_count(0)
    expect(page.get_by_text("Connecting…")).to_have_count(0)
    page.get_by_role("link", name="Go to your stacks").click()
    expect(page).to_have_url(re.compile(rf"/orgs/{tenant.org}/stacks$"))
    ui.check_screen(page, "not-found-back-to-stacks")
