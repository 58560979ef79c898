"""Browser: the Drift overview (a stack drifted with its address, one not checked), a stack's Drift
tab, and Notifications (a destination added through the form, a test sent to a real receiver, the
delivery history with its attempts); at a laptop's size and a phone's. Pinned to SQLite, as the
other browser tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect
from test_drift_notifications import MAIN, out_of_band_state_rm

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from support.e2e import Api, StackRepo, make_stack_repo
from support.waiting import wait_until
from support.webhooks import Receiver, webhook_receiver

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = [pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    env = settings_env(database_url, tmp_path / "data", FIRSTLUME_ALLOW_PRIVATE_WEBHOOKS="true")
    live = start_live_server(env, tmp_path / "server.log")
    yield live
    stop_live_server(live)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as found:
        yield found


@pytest.fixture
def drifted(api: Api, tmp_path: Path, terraform_binary: str) -> str:
    repo: StackRepo = make_stack_repo(tmp_path, MAIN)
    api.create_stack("app", repo)
    api.create_stack("idle", repo)
    run_id = api.start("app", "apply")
    api.wait(run_id, "awaiting_approval")
    api.approve(run_id)
    api.wait(run_id, "applied")
    api.wait(api.start("app", "drift"), "no_changes")
    out_of_band_state_rm(tmp_path, repo, "terraform_data.second")
    return str(api.wait(api.start("app", "drift"), "drifted")["id"])


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_drift_overview_stack_tab_and_notifications(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, drifted: str, receiver: Receiver, size: str
) -> None:
    page = ui.open(ui.sizes[size])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/drift")
    expect(page).to_have_title(f"Drift · {tenant.org} · Firstlume")
    app = page.locator("tr[data-stack='app']")
    expect(app.locator("[data-drift]")).to_have_text("drifted")
    expect(app).to_contain_text("terraform_data.second")
    expect(page.locator("tr[data-stack='idle'] [data-drift]")).to_have_text("not checked")
    expect(page.get_by_test_id("drift-count-DRIFTED")).to_have_text("1")
    ui.check_screen(page, f"{size}-drift-overview")

    app.get_by_role("link", name="app").click()
    expect(page).to_have_title("Drift · app · Stacks · Firstlume")
    rows = page.locator("tr[data-run]")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("terraform_data.second")
    expect(rows.first.locator("[data-drift]")).to_have_text("drifted")
    expect(rows.nth(1).locator("[data-drift]")).to_have_text("in sync")
    expect(page.get_by_test_id("drift-schedule")).to_contain_text("No drift schedule")
    ui.check_screen(page, f"{size}-stack-drift")
    # The stack's own schedule, set on its tab; "Inherit" clears it again.
    page.get_by_label("Drift schedule (cron, UTC)").fill("30 5 * * 1")
    page.get_by_role("button", name="Save schedule").click()
    expect(page.get_by_test_id("schedule-saved")).to_have_text("Saved: checks run on 30 5 * * 1 (UTC).")
    expect(page.get_by_test_id("drift-schedule")).to_contain_text("30 5 * * 1")
    page.get_by_role("button", name="Inherit").click()
    expect(page.get_by_test_id("schedule-saved")).to_have_text("Saved: the schedule is inherited.")
    expect(page.get_by_test_id("drift-schedule")).to_contain_text("No drift schedule")

    page.goto(f"{server.url}/orgs/{tenant.org}/notifications")
    expect(page).to_have_title(f"Notifications · {tenant.org} · Firstlume")
    page.get_by_label("Name").fill("ops channel")
    page.get_by_label("URL").fill(receiver.url)
    page.get_by_label("Signing secret").fill("ui-secret-93")
    page.get_by_role("button", name="Add destination").click()
    card = page.locator(".destination")
    expect(card).to_contain_text("ops channel")
    expect(card).to_contain_text("signed")
    card.get_by_role("button", name="Send a test").click()
    expect(card.get_by_test_id("test-result")).to_contain_text("Delivered (HTTP 200)")
    wait_until(lambda: receiver.received, 10, "the test message")
    assert receiver.received[0].signed_with("ui-secret-93")
    expect(card.locator("tr[data-delivery]")).to_contain_text("delivered")
    expect(card.locator("tr[data-delivery]")).to_contain_text("200")
    assert "ui-secret-93" not in page.content()
    ui.check_screen(page, f"{size}-notifications")


def drift_runs(api: Api, stack: str) -> list[dict[str, object]]:
    response = api.http.get(f"{api.o}/stacks/{stack}/drift")
    assert response.status_code == 200, response.text
    return response.json()["runs"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_drift_is_worst_first_says_what_drifted_and_checks_reconciles_and_schedules(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, drifted: str, size: str
) -> None:
    page = ui.open(ui.sizes[size])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/drift")
    rows = page.locator("tr[data-stack]")
    # Worst first: the drifted stack above the one never checked, whatever their names.
    expect(rows.first).to_have_attribute("data-stack", "app")
    app = page.locator("tr[data-stack='app']")
    expect(app.locator("[data-finding]")).to_have_text("terraform_data.second Deleted outside Terraform")
    expect(app).not_to_contain_text("Will be")
    expect(app.get_by_test_id("schedule")).to_have_text("none")
    ui.check_screen(page, f"{size}-drift-actions")

    # Check now starts a drift run of that stack; the page follows it live to its end.
    before = len(drift_runs(api, "app"))
    app.get_by_role("button", name="Check now: app").click()
    expect(app.get_by_test_id("drift-started")).to_contain_text("Drift check")
    wait_until(lambda: len(drift_runs(api, "app")) == before + 1, 10, "the drift run")
    newest = drift_runs(api, "app")[0]
    assert newest["trigger"] == "manual"  # the drift route lists drift runs only
    api.wait(str(newest["id"]), "drifted")
    expect(app.locator("td[data-label='Last check']")).to_have_text(f"#{newest['number']}")

    # Reconcile starts an apply of the drifted stack.
    app.get_by_role("button", name="Reconcile app").click()
    expect(app.get_by_test_id("drift-started")).to_contain_text("Apply")
    runs = api.http.get(f"{api.o}/stacks/app/runs").json()["runs"]
    assert runs[0]["type"] == "apply" and runs[0]["id"] != newest["id"]

    # The organization's schedule: refused in the API's words, then saved and shown on each stack.
    schedule = page.get_by_label("Drift schedule (cron, UTC)")
    schedule.fill("every morning")
    page.get_by_role("button", name="Save schedule").click()
    expect(page.get_by_role("alert")).to_contain_text("The schedule was not saved.")
    expect(page.get_by_role("alert")).to_contain_text("cron")
    schedule.fill("0 6 * * *")
    page.get_by_role("button", name="Save schedule").click()
    expect(page.get_by_test_id("schedule-saved")).to_have_text("Saved: checks run on 0 6 * * * (UTC).")
    expect(app.get_by_test_id("schedule")).to_have_text("0 6 * * *")
    assert api.http.get(f"{api.o}/settings").json()["explicit"]["drift_schedule"] == "0 6 * * *"
    ui.check_screen(page, f"{size}-drift-scheduled")
