"""Browser: the Policies page (a compile error shown in place with its line and column, then the
saved policy tested against a past run) and the run page's Policy checks panel (a warning kept
on a run that goes on; a deny that failed another run).

Pinned to SQLite like the other browser tests."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from conftest import LiveServer, Tenant
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = [requires_terraform, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

MAIN = 'resource "terraform_data" "db" {\n  input = { protected = true }\n}\n'
BROKEN = "package firstlume.protect\n\ndeny contains msg if {\n  msg := input.a +\n}\n"
PROTECT = """package firstlume.protect

deny contains msg if {
  some rc in input.plan.resource_changes
  "delete" in rc.change.actions
  rc.change.before.input.protected == true
  msg := sprintf("%s is protected", [rc.address])
}

warn contains msg if {
  some rc in input.plan.resource_changes
  "create" in rc.change.actions
  msg := sprintf("%s is new", [rc.address])
}
"""


def test_policies_page_shows_compile_errors_in_place_and_tests_against_a_past_run_and_the_run_shows_its_checks(
    ui: UI, server: LiveServer, api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, MAIN)
    api.create_stack("web", repo)
    past = api.start("web", "plan")
    api.wait(past, "planned")

    page = ui.open(ui.sizes["desktop"])
    ui.sign_in(page, tenant.token, "/orgs/acme/policies")
    page.get_by_role("button", name="New policy").click()
    page.get_by_label("Name").fill("protect")
    page.get_by_label("Rego").fill(BROKEN)
    page.get_by_role("button", name="Create policy").click()
    error = page.get_by_test_id("compile-error")
    expect(error).to_contain_text("line 4, column 7")
    expect(error).to_have_attribute("data-line", "4")
    expect(error).to_contain_text("4 |   msg := input.a +")
    expect(page.get_by_test_id("policies")).to_have_count(0)  # nothing was saved

    page.get_by_label("Rego").fill(PROTECT)
    expect(error).to_have_count(0)  # an edit clears the error
    page.get_by_role("button", name="Create policy").click()
    expect(page.locator("[data-policy=protect]")).to_be_visible()

    # Tested against the past plan: it created terraform_data.db, so a warning.
    page.get_by_label("Run id").fill(past)
    page.get_by_role("button", name="Test").click()
    result = page.get_by_test_id("policy-test-result")
    expect(result).to_have_attribute("data-result", "warn")
    expect(result).to_contain_text("terraform_data.db is new")

    # On a run: the Policy checks panel shows the warning, and the run goes on.
    # The setting, on the organization's settings page; the stack inherits it, with its origin.
    page.goto(f"{server.url}/orgs/acme/settings")
    setting = page.locator("[data-setting=policies]")
    setting.get_by_label("policies").fill("protect")
    page.get_by_role("button", name="Save approval rules").click()
    page.get_by_test_id("confirm-change").get_by_role("button", name="Save").click()
    expect(setting.get_by_test_id("effective")).to_contain_text("Effective here: protect")
    page.goto(f"{server.url}/orgs/acme/stacks/web/settings")
    expect(page.locator("[data-setting=policies]").get_by_test_id("effective")).to_contain_text(
        "Effective here: protect inherited from organization"
    )
    created = api.start("web", "apply")
    api.wait(created, "awaiting_approval")
    page.goto(f"{server.url}/orgs/acme/runs/{created}")
    checks = page.get_by_test_id("policy-checks")
    expect(checks.locator("[data-policy=protect]")).to_have_attribute("data-result", "warn")
    expect(checks).to_contain_text("terraform_data.db is new")
    api.approve(created)
    api.wait(created, "applied")

    # Deleting the protected resource: the run failed by the policy, before approval.
    repo.commit({"main.tf": "# nothing\n"}, "Drop the database")
    denied = api.start("web", "apply")
    api.wait(denied, "failed")
    page.goto(f"{server.url}/orgs/acme/runs/{denied}")
    expect(page.get_by_test_id("run-error")).to_contain_text("policy protect: terraform_data.db is protected")
    expect(page.get_by_test_id("policy-checks").locator("[data-policy=protect]")).to_have_attribute(
        "data-result", "deny"
    )
    expect(page.get_by_test_id("approval")).to_have_count(0)
