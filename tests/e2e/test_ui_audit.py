"""Browser: the organization's Audit page lists who changed what (names only, never a value) and
filters by action, at a laptop's size and a phone's. Pinned to SQLite, as the other browser tests."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from conftest import LiveServer, Tenant
from support.e2e import Api

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

SECRET = "audit-ui-secret-5e2a"


def make_changes(api: Api) -> None:
    def ok(response: object) -> None:
        assert getattr(response, "status_code", 0) < 300, getattr(response, "text", "")

    ok(api.http.post(f"{api.o}/stacks", content=json.dumps({"slug": "net", "repository": "file:///nowhere"})))
    ok(api.http.patch(f"{api.o}/settings", content=json.dumps({"require_approval": True})))
    ok(api.http.patch(f"{api.o}/stacks/net/settings", content=json.dumps({"drift_schedule": "0 6 * * 1"})))
    ok(
        api.http.put(
            f"{api.o}/stacks/net/variables/DB_PASSWORD",
            content=json.dumps({"value": SECRET, "sensitive": True}),
        )
    )
    lock = json.dumps({"ID": "maintenance-1", "Operation": "OperationTypeApply", "Who": "bob@laptop"})
    ok(api.http.request("LOCK", f"{api.o}/stacks/net/state/lock", content=lock))
    ok(api.http.delete(f"{api.o}/stacks/net/state/lock"))


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_audit_page_lists_changes_and_filters_them(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, size: str
) -> None:
    make_changes(api)
    page = ui.open(ui.sizes[size])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/audit")
    expect(page).to_have_title(f"Audit · {tenant.org} · Firstlume")
    rows = page.get_by_test_id("audit-entry")
    # organization.create and token.create (made by the test's set-up), then the five changes (a
    # LOCK is Terraform's everyday work, not audited; the force-unlock is).
    expect(rows).to_have_count(7)
    expect(rows.first).to_contain_text("state.force_unlock")
    expect(rows.first).to_contain_text("maintenance-1")
    table = page.get_by_test_id("audit-table")
    expect(table).to_contain_text("DB_PASSWORD at stack:net (sensitive)")
    expect(table).to_contain_text("drift_schedule: — → 0 6 * * 1")
    expect(table).to_contain_text(tenant.email)
    assert SECRET not in page.content()
    ui.check_screen(page, f"audit-{size}")

    page.get_by_label("Action").select_option("settings.update")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(2)
    expect(page).to_have_url(f"{server.url}/orgs/{tenant.org}/audit?action=settings.update")
    expect(rows.first).to_contain_text("stack:net")
    ui.check_screen(page, f"audit-filtered-{size}")

    page.get_by_label("Stack").fill("nothing-here")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("No change matches these filters.")).to_be_visible()
    page.get_by_role("link", name="Clear").click()
    expect(rows).to_have_count(7)
    assert ui.close() == []
