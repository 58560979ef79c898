"""Browser: what a run shows beyond the happy path: step timeline with each step's own log,
commit and configuration used, Terraform's error on a failed resource, and a plan with over a
thousand changes.

Pinned to SQLite: the browser tests exercise the UI, and the API beneath them already runs on
both databases in the rest of the suite; one dialect keeps these slower tests fast."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from conftest import LiveServer, Tenant
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform

if TYPE_CHECKING:
    from support.browser import UI

# The fixture `ui`.
pytest_plugins = ["support.browser"]
pytestmark = [requires_terraform, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]


def test_a_run_shows_its_steps_with_their_own_logs_and_the_configuration_it_used(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, tmp_path: Path
) -> None:
    main = """
variable "greeting" { type = string }
variable "token" {
  type      = string
  sensitive = true
}
resource "terraform_data" "hello" { input = "${var.greeting}-${nonsensitive(length(var.token))}" }
"""
    repo = make_stack_repo(tmp_path, main, config_yaml="variables:\n  greeting: from-config\n")
    api.create_stack("app", repo, folder="prod")
    api.put_variable("/stacks/app", "token", {"value": "tok-secret-value", "sensitive": True})
    run_id = api.start("app", "plan")
    api.wait(run_id, "planned")

    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}/steps")
    timeline = page.get_by_test_id("timeline")
    for name in ("checkout", "init", "plan"):
        expect(timeline.locator(f'[data-step="{name}"]')).to_have_attribute("data-step-status", "DONE")
        # Each step shows how long it took: "840 ms", or "1.3 s" on a busy machine.
        expect(timeline.locator(f'[data-step="{name}"]')).to_contain_text(re.compile(r"\d ?(ms|s)\b"))
    timeline.locator('[data-step="init"]').get_by_role("button").click()
    init_log = timeline.locator('[data-step="init"]').get_by_test_id("log")
    expect(init_log).to_contain_text("Terraform has been successfully initialized")
    expect(init_log).not_to_contain_text("will be created")
    timeline.locator('[data-step="plan"]').get_by_role("button").click()
    expect(timeline.locator('[data-step="plan"]').get_by_test_id("log")).to_contain_text(
        "terraform_data.hello will be created"
    )
    ui.screenshot(page, "run-steps")

    page.get_by_role("link", name="Configuration").click()
    expect(page.locator("pre.code")).to_contain_text("greeting: from-config")
    variables = page.locator("section", has=page.get_by_role("heading", name="Variables"))
    expect(variables.locator("tr", has_text="greeting")).to_contain_text("config.yaml")
    expect(variables.locator("tr", has_text="token")).to_contain_text("stack")
    expect(variables.locator("tr", has_text="token")).to_contain_text("secret, hidden")
    backends = page.locator("section", has=page.get_by_role("heading", name="State backends"))
    expect(backends.locator("tbody tr")).to_have_text(".local")
    expect(page.get_by_test_id("commit")).to_contain_text("Initial stack")
    assert "tok-secret-value" not in page.content()
    ui.screenshot(page, "run-configuration")

    # Deep links to a run's view work on reload.
    page.reload()
    expect(page.locator("pre.code")).to_contain_text("greeting: from-config")


def test_a_failed_resource_shows_terraform_error_and_the_rest_not_applied(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, tmp_path: Path
) -> None:
    main = """
resource "terraform_data" "broken" {
  input = "x"
  provisioner "local-exec" { command = "echo the disk is full >&2; exit 1" }
}
resource "terraform_data" "after" { input = terraform_data.broken.output }
"""
    api.create_stack("app", make_stack_repo(tmp_path, main))
    run_id = api.start("app", "apply")
    api.wait(run_id, "awaiting_approval")

    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    page.get_by_test_id("approval").get_by_role("button", name="Approve").click()
    broken = page.locator('[data-address="terraform_data.broken"]')
    expect(broken).to_have_attribute("data-state", "FAILED")
    expect(broken.locator(".resource-error")).to_contain_text("local-exec provisioner error")
    expect(page.locator('[data-address="terraform_data.after"]')).to_have_attribute(
        "data-state", "NOT_APPLIED"
    )
    expect(page.get_by_test_id("run-status")).to_have_text("failed")
    expect(page.locator('[data-step="apply"]').first).to_have_attribute("data-step-status", "FAILED")
    # The failure belongs to a resource: counted apart (live, as the run ends), and the run has
    # no error of its own to show.
    expect(page.get_by_test_id("failed-resources")).to_have_text(
        "1 resource failed: terraform_data.broken. Each one's error is with its change below."
    )
    expect(page.get_by_test_id("run-error")).to_have_count(0)
    ui.check_screen(page, "run-failed")
    phone = ui.open({"width": 390, "height": 844})
    ui.sign_in(phone, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    expect(phone.get_by_test_id("failed-resources")).to_contain_text("terraform_data.broken")
    ui.check_screen(phone, "run-failed-phone")


def test_a_plan_with_over_a_thousand_changes_is_paged_and_filtered_quickly(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, tmp_path: Path
) -> None:
    main = 'resource "terraform_data" "node" {\n  count = 1200\n  input = "n-${count.index}"\n}\n'
    api.create_stack("big", make_stack_repo(tmp_path, main))
    run_id = api.start("big", "plan")
    api.wait(run_id, "planned", timeout=180)

    page = ui.open()
    ui.sign_in(page, tenant.token)
    started = time.monotonic()
    page.goto(f"/orgs/{tenant.org}/runs/{run_id}")
    expect(page.get_by_test_id("summary")).to_have_text("1,200 create")
    created = page.locator('section[data-group="CREATE"]')
    expect(created.get_by_test_id("group-count")).to_have_text("1,200")
    # One page of the group is in the document, not all of it.
    expect(created.locator("[data-address]")).to_have_count(50)
    loaded = time.monotonic() - started
    expect(created.locator(".pager")).to_contain_text("1–50 of 1,200")
    created.get_by_role("button", name="Next →").click()
    expect(created.locator("[data-address]").first).to_have_attribute(
        "data-address", "terraform_data.node[50]"
    )

    page.get_by_label("Filter changes by text").fill("node[1199]")
    expect(created.locator("[data-address]")).to_have_count(1)
    expect(created.locator("[data-address]")).to_have_attribute("data-address", "terraform_data.node[1199]")
    page.get_by_label("Filter changes by text").fill("node[11")
    expect(created.locator(".pager")).to_contain_text("of 111")
    assert loaded < 10, f"the run page took {loaded:.1f}s to show 1,200 changes"
