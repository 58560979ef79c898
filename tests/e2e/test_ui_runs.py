"""Browser: a real apply through the UI, watched live, in real Chromium against the served
control plane running real Terraform on a real Git repository.

Pinned to SQLite: the browser tests exercise the UI, and the API beneath them already runs on
both databases in the rest of the suite; one dialect keeps these slower tests fast."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import Page, expect

from conftest import LiveServer, Tenant
from support.e2e import Api, StackRepo, make_stack_repo
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
resource "terraform_data" "upd" { input = "a" }
"""

# One delete, one replace, one update, one create; the created resource takes a sensitive value
# and a moment to apply, so its `applying` state can be seen.
AFTER = """
variable "secret" {
  type      = string
  sensitive = true
  default   = "hunter2-do-not-show"
}
resource "terraform_data" "repl" {
  input            = "r"
  triggers_replace = ["v2"]
}
resource "terraform_data" "upd" { input = "b" }
resource "terraform_data" "new" {
  input = var.secret
  provisioner "local-exec" { command = "sleep 3" }
}
"""


def applied_stack(api: Api, tmp_path: Path) -> StackRepo:
    """A stack whose BEFORE is applied (through the REST API), with AFTER committed next."""
    repo = make_stack_repo(tmp_path, BEFORE)
    api.create_stack("app", repo, folder="prod")
    api.settings("", {"require_approval": False})
    api.wait(api.start("app", "apply"), "applied")
    api.settings("", {"require_approval": None})
    repo.commit({"main.tf": AFTER}, "Rotate the replica and retire the old queue\n\nLonger body.")
    return repo


def active_entry(page: Page, run_id: str):
    return page.get_by_test_id("active-runs").locator(f'li[data-run-id="{run_id}"]')


def test_apply_is_watched_live_from_plan_log_to_every_resource_done_with_destructive_changes_confirmed(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, tmp_path: Path
) -> None:
    applied_stack(api, tmp_path)
    api.settings("/folders/prod", {"confirm_destructive": True})
    # Another apply holds the stack's lock (awaiting approval), so ours queues behind it.
    blocker = api.start("app", "apply")
    api.wait(blocker, "awaiting_approval")

    # A second person watches the stacks screen in their own browser.
    other = ui.open()
    ui.sign_in(other, tenant.token)
    expect(active_entry(other, blocker)).to_have_class(re.compile("attention"))
    expect(other.get_by_test_id("approval-shortcut")).to_have_text("1 awaiting approval")

    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/stacks/app")
    page.get_by_role("button", name="Apply", exact=True).click()
    expect(page).to_have_url(re.compile(r"/runs/[^/]+$"))
    run_id = page.url.rsplit("/", 1)[1]
    expect(page.get_by_test_id("run-status")).to_have_text("queued")
    # Why it waits: the run holding the lock, named and linked, and its place in the queue.
    waiting = page.locator(".run-head").get_by_test_id("waiting-for")
    expect(waiting).to_contain_text(
        "Waiting for run #2 (apply, awaiting approval), which holds the stack's lock"
    )
    expect(waiting).to_contain_text("next in the stack's queue")
    expect(waiting.get_by_role("link", name="run #2")).to_have_attribute(
        "href", re.compile(rf"/runs/{blocker}$")
    )
    expect(page.get_by_role("button", name="Cancel run")).to_be_visible()

    # The other browser sees the new run arrive in its active-run bar, without reloading.
    expect(active_entry(other, run_id)).to_contain_text("queued")
    expect(active_entry(other, run_id).get_by_test_id("waiting-for")).to_contain_text(
        "Waiting for run #2 (apply, awaiting approval), which holds the stack's lock; next in the stack's queue."
    )

    page.get_by_role("link", name="Logs").click()
    log = page.get_by_test_id("log")
    expect(log).to_contain_text("Waiting for the run to start (number 1 in the stack's queue)")

    # The other person reviews the blocking run from their bar (one click) and discards it.
    active_entry(other, blocker).get_by_role("link").click()  # a run that waits for none: one link
    expect(other.get_by_test_id("approval")).to_contain_text("This plan is waiting for approval")
    other.get_by_role("button", name="Discard").click()
    expect(other.get_by_test_id("run-status")).to_have_text("discarded")

    # Our plan starts and its log arrives in the page that has been open all along.
    expect(log).to_contain_text("Terraform will perform the following actions")
    expect(log).to_contain_text("Plan: 2 to add, 1 to change, 2 to destroy.")
    expect(page.get_by_test_id("run-status")).to_have_text("awaiting approval")
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
    ui.screenshot(page, "run-logs")

    # Grouped changes with counts and the summary line.
    page.get_by_role("link", name=re.compile("^Changes")).click()
    expect(page.get_by_test_id("summary")).to_have_text("1 delete · 1 replace · 1 update · 1 create")
    groups = page.locator("section[data-group]")
    expect(groups.locator("h3")).to_have_text(
        ["Will be deleted", "Will be replaced", "Will be updated", "Will be created"]
    )
    expect(groups.get_by_test_id("group-count")).to_have_text(["1", "1", "1", "1"])
    upd = page.locator('[data-address="terraform_data.upd"]')
    expect(upd).to_contain_text("terraform_data")
    expect(upd.locator("tr", has_text="input")).to_contain_text('"a" → "b"')
    repl = page.locator('[data-address="terraform_data.repl"]')
    expect(repl).to_contain_text("Replaced because triggers_replace changes")
    expect(repl.locator("tr", has_text="triggers_replace")).to_contain_text("forces replacement")
    new = page.locator('[data-address="terraform_data.new"]')
    expect(new.locator("tr", has_text="input")).to_contain_text("(sensitive)")
    assert "hunter2" not in page.content()

    # confirm_destructive: approve stays locked until every deletion and replacement is ticked.
    approval = page.get_by_test_id("approval")
    approve = approval.get_by_role("button", name=re.compile("^Approve"))
    expect(approval).to_contain_text("confirm_destructive is on")
    expect(approve).to_be_disabled()
    approval.get_by_role("checkbox", name="Confirm deleting terraform_data.gone").check()
    expect(approve).to_be_disabled()
    expect(approval.get_by_test_id("confirm-progress")).to_have_text("1 of 2 confirmed")
    approval.get_by_role("checkbox", name="Confirm replacing terraform_data.repl").check()
    expect(approve).to_be_enabled()
    # The other browser's bar highlights our run, which now awaits approval.
    expect(active_entry(other, run_id)).to_have_class(re.compile("attention"))
    ui.screenshot(page, "run-approval")
    approve.click()

    # Resource states change live: the slow create is seen applying, then everything is done.
    expect(new.get_by_text("applying")).to_be_visible()
    for address in ("gone", "repl", "upd", "new"):
        expect(page.locator(f'[data-address="terraform_data.{address}"]')).to_have_attribute(
            "data-state", "DONE"
        )
    expect(repl.get_by_test_id("stages")).to_have_text(re.compile(r"delete\s*done\s*→\s*create\s*done"))
    expect(page.get_by_test_id("run-status")).to_have_text("applied")
    expect(page.get_by_test_id("approved-by")).to_have_text(tenant.email)
    expect(page.get_by_test_id("acknowledged")).to_have_text("terraform_data.gone, terraform_data.repl")
    expect(page.locator('[data-step="apply"]').first).to_have_attribute("data-step-status", "DONE")
    ui.screenshot(page, "run-applied")

    # The other browser's bar empties as the run ends, still without reloading.
    expect(other.get_by_test_id("active-count")).to_have_text("0")
    expect(other.get_by_test_id("approval-shortcut")).to_have_count(0)
