"""Browser: a failed apply of 201 resources is easy to triage (issue 48, item 5). The run page
says what happened ("198 done, 2 failed, 1 not applied"); the state filter (failures first)
finds the 2 failed of 201; the failure banner's addresses link to their changes; Retry starts a
new run of the same type at the same commit (even after the branch moved on).

A real Terraform apply in which two resources' provisioners fail. Pinned to SQLite like the
other browser tests."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from conftest import Tenant
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = [requires_terraform, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

# 198 that apply, 2 whose provisioner fails, and 1 that needs a failed one (never applied).
MAIN = """
resource "terraform_data" "ok" {
  count = 198
  input = "ok-${count.index}"
}
resource "terraform_data" "broken" {
  count = 2
  input = "broken-${count.index}"
  provisioner "local-exec" { command = "echo the disk is full >&2; exit 1" }
}
resource "terraform_data" "after" { input = terraform_data.broken[0].output }
"""
FAILED = ["terraform_data.broken[0]", "terraform_data.broken[1]"]


def test_the_failed_filter_finds_2_of_201_and_retry_runs_the_same_commit_again(
    ui: UI, api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, MAIN)
    api.create_stack("fleet", repo)
    api.settings("", {"require_approval": False})
    run_id = api.start("fleet", "apply")
    failed = api.wait(run_id, "failed", timeout=240)
    assert failed["failed_resources"]["count"] == 2
    commit = failed["commit"]["sha"]
    repo.commit({"README.md": "moved on\n"}, "The branch moves on")  # Retry must not take the tip

    page = ui.open(ui.sizes["desktop"])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    expect(page.get_by_test_id("outcome-summary")).to_have_text(
        "Outcome of the apply: 198 done, 2 failed, 1 not applied"
    )
    banner = page.get_by_test_id("failed-resources")
    expect(banner).to_contain_text("2 resources failed")

    # The state filter: failures first, with their counts; "failed" finds the 2 of 201.
    state = page.get_by_label("Filter by state")
    expect(state.locator("option")).to_have_text(
        ["All states", "failed (2)", "not applied (1)", "done (198)"]
    )
    state.select_option(label="failed (2)")
    expect(page.get_by_test_id("filter-matches")).to_have_text("2 matches of 201")
    rows = page.locator(".change[data-address]")
    expect(rows).to_have_count(2)
    found = rows.evaluate_all("rs => rs.map(r => [r.dataset.address, r.dataset.state])")
    assert sorted(found) == [[address, "FAILED"] for address in FAILED], found
    expect(page).to_have_url(f"{ui.server.url}/orgs/{tenant.org}/runs/{run_id}?state=failed")
    ui.check_screen(page, "desktop-failed-filter")
    state.select_option(label="not applied (1)")
    expect(rows).to_have_count(1)
    expect(rows).to_have_attribute("data-address", "terraform_data.after")
    state.select_option(label="All states")
    expect(page.get_by_test_id("filter-matches")).to_have_count(0)

    # The banner's addresses are links to their changes: the failures, that one in view.
    page.goto(f"/orgs/{tenant.org}/runs/{run_id}/logs")
    link = page.get_by_test_id("failed-resources").get_by_role("link", name="terraform_data.broken[1]")
    link.click()
    expect(page).to_have_url(
        f"{ui.server.url}/orgs/{tenant.org}/runs/{run_id}?state=failed#change-terraform_data.broken%5B1%5D"
    )
    target = page.locator('[data-address="terraform_data.broken[1]"]')
    expect(target).to_be_in_viewport()
    expect(target.locator(".resource-error")).to_contain_text("the disk is full")
    expect(page.get_by_test_id("filter-matches")).to_have_text("2 matches of 201")

    # Phone: the same triage fits.
    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}?state=failed")
    expect(phone.get_by_test_id("filter-matches")).to_have_text("2 matches of 201")
    ui.check_screen(phone, "phone-failed-filter")

    # Retry: a new apply at the failed run's commit, not the branch's new tip.
    retry = page.get_by_test_id("retry")
    expect(retry).to_contain_text(f"A new apply run at the same commit, {commit[:7]}.")
    retry.get_by_role("button", name="Retry").click()
    expect(page.get_by_role("heading", name="Run #2")).to_be_visible()
    new_id = page.url.rstrip("/").split("/runs/")[1].split("?")[0]
    again = api.run(new_id)
    assert again["type"] == "apply" and again["trigger"]["commit"] == commit
    assert api.wait(new_id, "failed", timeout=240)["commit"]["sha"] == commit
