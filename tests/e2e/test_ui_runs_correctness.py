"""Browser: a plan whose only changes are outputs shows them (not "No changes"), sensitive ones as
(sensitive), in the summary line and the changes view; a run that waits for a person's state lock
says so on its page, and starts once the lock is released.

Pinned to SQLite, as the other browser tests: the API beneath runs on both databases elsewhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect
from test_runs_correctness_terraform import OUTPUTS, RESOURCE, managed_repo

from conftest import LiveServer, Tenant
from support.e2e import Api
from support.terraform import requires_terraform

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = [requires_terraform, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]


def test_output_changes_and_the_wait_for_a_persons_lock_show_on_the_run_page(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, tmp_path: Path
) -> None:
    repo = managed_repo(tmp_path, RESOURCE + OUTPUTS)
    api.create_stack("app", repo)
    first = api.start("app", "apply")
    api.wait(first, "awaiting_approval")
    api.approve(first)
    api.wait(first, "applied")
    repo.commit({"main.tf": RESOURCE + OUTPUTS.replace('"hello"', '"bonjour"')}, "Say it in French")
    plan = api.start("app", "plan")
    assert api.wait(plan, "planned")["summary_text"] == "1 output change"

    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{plan}")
    expect(page.get_by_test_id("summary")).to_contain_text("1 output change")
    outputs = page.get_by_test_id("output-changes")
    expect(outputs.locator("[data-output='greeting']")).to_contain_text("hello → bonjour")
    expect(page.get_by_text("No changes.")).to_have_count(0)

    # ada holds the state lock (a lock left behind): the next run waits, and says why.
    state = f"{api.o}/stacks/app/state/lock"
    lock = json.dumps({"ID": "ada-1", "Operation": "OperationTypeApply", "Who": "ada@laptop"})
    assert api.http.request("LOCK", state, content=lock).status_code == 200
    waiting = api.start("app", "plan")
    page.goto(f"/orgs/{tenant.org}/runs/{waiting}")
    # On the run's page, and in the active-runs panel of every screen.
    reason = page.get_by_test_id("waiting-for-state-lock")
    expect(reason).to_have_count(2)
    for shown in reason.all():
        expect(shown).to_contain_text("Waiting for the state lock held by ada@example.com since ")
    expect(page.get_by_test_id("active-runs").get_by_test_id("waiting-for-state-lock")).to_have_count(1)
    ui.check_screen(page, "run-waiting-for-state-lock")

    assert api.http.request("UNLOCK", state, content=lock).status_code == 200
    api.wait(waiting, "planned")
    expect(reason).to_have_count(0)
