"""Browser: safe, role-aware edits (issue 48, items 9, 10 and 12). Controls follow what the
server says the viewer may do (viewerCan): a reader sees no Plan, Apply or New button; an operator
who is not among a run's approvers cannot tick its confirmations, and the approvals counter leaves
that run out. Settings save with one explicit Save, after a confirmation naming how many stacks
the change reaches, and say "Saved"; a role change asks first too. The edit forms (a stack's
repository, branch and path; a notification destination; a member's groups) save and the server
holds the new values; a new token has a Copy button and the browser's own token is marked. Every
changed page passes axe-core at both sizes.

Pinned to SQLite like the other browser tests."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect
from test_ui_access import cli_token

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = [requires_terraform, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

MAIN = 'resource "terraform_data" "a" { input = "a" }\n'


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    # The notification destination edited below is this server itself: a loopback address.
    env = settings_env(database_url, tmp_path / "data", FIRSTLUME_ALLOW_PRIVATE_WEBHOOKS="true")
    live = start_live_server(env, tmp_path / "server.log")
    yield live
    stop_live_server(live)


TWO = MAIN + 'resource "terraform_data" "b" { input = "b" }\n'


def test_a_reader_sees_no_plan_apply_or_new_button_and_an_operator_does(
    ui: UI, server: LiveServer, api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    api.create_stack("web", make_stack_repo(tmp_path, MAIN), folder="prod")
    reader = cli_token(server, "rita@example.com", "reader")
    operator = cli_token(server, "otto@example.com", "operator")
    for size in ("desktop", "phone"):
        page = ui.open(ui.sizes[size])
        ui.sign_in(page, reader, "/orgs/acme/stacks/web")
        expect(page.get_by_test_id("cannot-start")).to_contain_text("starting runs needs the operator role")
        for name in ("Plan", "Apply", "Destroy"):
            expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
        # The push trigger is read, not offered.
        expect(page.get_by_test_id("stack-trigger-text")).to_be_visible()
        expect(page.get_by_test_id("stack-trigger")).to_have_count(0)
        ui.check_screen(page, f"{size}-reader-stack")
        page.goto("/orgs/acme/stacks")
        expect(page.locator('[data-stack="web"]')).to_be_visible()
        expect(page.get_by_role("button", name="New stack")).to_have_count(0)
        expect(page.get_by_role("button", name="New folder")).to_have_count(0)
        page.goto("/orgs/acme/settings")
        expect(page.get_by_test_id("settings-readonly")).to_be_visible()
        expect(page.get_by_role("button", name="Save approval rules")).to_have_count(0)
        expect(page.get_by_test_id("variables-readonly")).to_be_visible()
        ui.check_screen(page, f"{size}-reader-settings")

    page = ui.open()
    ui.sign_in(page, operator, "/orgs/acme/stacks/web")
    expect(page.get_by_role("button", name="Plan", exact=True)).to_be_enabled()
    expect(page.get_by_role("button", name="Apply", exact=True)).to_be_enabled()
    page.goto("/orgs/acme/stacks")
    expect(page.locator('[data-stack="web"]')).to_be_visible()
    expect(page.get_by_role("button", name="New stack")).to_have_count(0)  # admins create stacks
    admin = ui.open()
    ui.sign_in(admin, tenant.token, "/orgs/acme/stacks")
    expect(admin.get_by_role("button", name="New stack")).to_be_visible()
    assert ui.close() == []


def test_a_non_approver_cannot_tick_the_confirmations_and_is_left_out_of_the_counter(
    ui: UI, server: LiveServer, api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, TWO)
    api.create_stack("db", repo)
    api.settings("", {"require_approval": False})
    api.wait(api.start("db", "apply"), "applied")
    api.settings("", {"require_approval": None, "confirm_destructive": True, "approvers": ["group:sre"]})
    repo.commit({"main.tf": MAIN}, "Retire b")
    run_id = api.start("db", "apply")
    api.wait(run_id, "awaiting_approval")
    bob = cli_token(server, "bob@example.com", "operator")  # an operator, not in group:sre
    sam = cli_token(server, "sam@example.com", "operator")
    assert (
        api.http.put(
            f"{api.o}/members/sam@example.com", json={"role": "operator", "groups": ["sre"]}
        ).status_code
        == 200
    )

    for size in ("desktop", "phone"):
        page = ui.open(ui.sizes[size])
        ui.sign_in(page, bob, f"/orgs/acme/runs/{run_id}")
        approval = page.get_by_test_id("approval")
        box = approval.get_by_role("checkbox", name="Confirm deleting terraform_data.b")
        expect(box).to_be_disabled()
        expect(box).not_to_be_checked()
        expect(approval.get_by_test_id("tick-all")).to_be_hidden()
        expect(approval.get_by_role("button", name=re.compile("^Approve"))).to_be_disabled()
        expect(approval.get_by_test_id("cannot-approve")).to_contain_text("only group:sre may decide")
        # The counter counts the runs this viewer may approve: none.
        expect(page.get_by_test_id("run-status")).to_have_text("awaiting approval")
        expect(page.get_by_test_id("approval-shortcut")).to_have_count(0)
        ui.check_screen(page, f"{size}-non-approver-confirmations")

    page = ui.open()
    ui.sign_in(page, sam, f"/orgs/acme/runs/{run_id}")
    expect(page.get_by_test_id("approval-shortcut")).to_have_text("1 awaiting approval")
    box = page.get_by_test_id("approval").get_by_role("checkbox", name="Confirm deleting terraform_data.b")
    expect(box).to_be_enabled()
    box.check()
    page.get_by_test_id("approval").get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_test_id("approved-by")).to_have_text("sam@example.com")
    assert ui.close() == []


def test_approval_rules_and_a_role_change_save_after_a_confirmation_naming_the_scope(
    ui: UI, server: LiveServer, api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, MAIN)
    for slug, folder in (("a", "prod"), ("b", "prod/eu"), ("c", "prod/us"), ("d", "dev")):
        api.create_stack(slug, repo, folder=folder)
    api.settings("/stacks/c", {"require_approval": True})  # c sets its own: not reached
    cli_token(server, "rita@example.com", "reader")

    for size in ("phone", "desktop"):  # the phone goes Back, the desktop saves
        page = ui.open(ui.sizes[size])
        ui.sign_in(page, tenant.token, "/orgs/acme/folders/prod")
        rule = page.locator('[data-setting="require_approval"]')
        rule.get_by_role("radio", name="Off").click()
        # Nothing is saved on the click: the server still has no value on prod/.
        assert api.http.get(f"{api.o}/folders/prod/settings").json()["explicit"]["require_approval"] is None
        expect(page.get_by_text("1 unsaved change.")).to_be_visible()
        page.get_by_role("button", name="Save approval rules").click()
        confirm = page.get_by_test_id("confirm-change")
        expect(confirm).to_contain_text("Change require_approval on this folder?")
        expect(page.get_by_test_id("settings-scope")).to_have_text(
            "It applies to 2 stacks under prod/ (those that do not set it themselves), from their next plan."
        )
        ui.check_screen(page, f"{size}-settings-confirm-scope")
        if size == "phone":
            confirm.get_by_role("button", name="Back").click()
            expect(confirm).to_have_count(0)
            continue
        confirm.get_by_role("button", name="Save").click()
        expect(page.locator(".approval-rules").get_by_test_id("saved")).to_have_text("✓ Saved")
        expect(rule.get_by_test_id("effective")).to_have_text("Effective here: off set on this folder")
        ui.check_screen(page, f"{size}-settings-saved")
    assert api.http.get(f"{api.o}/folders/prod/settings").json()["explicit"]["require_approval"] is False

    # A member's role: picked, confirmed with what it gives, then "Saved".
    for size in ("phone", "desktop"):
        page = ui.open(ui.sizes[size])
        ui.sign_in(page, tenant.token, "/orgs/acme/members")
        row = page.locator('[data-member="rita@example.com"]')
        page.get_by_label("Role of rita@example.com").select_option("operator")
        row.get_by_role("button", name="Save").click()
        confirm = row.get_by_test_id("confirm-change")
        expect(confirm).to_contain_text("Change rita@example.com?")
        expect(confirm).to_contain_text("role from reader to operator (also starts, approves")
        ui.check_screen(page, f"{size}-members-confirm-role")
        if size == "phone":
            confirm.get_by_role("button", name="Back").click()
            continue
        confirm.get_by_role("button", name="Save").click()
        expect(row.get_by_test_id("saved")).to_have_text("✓ Saved")
        ui.check_screen(page, f"{size}-members-saved")
    roles = {m["email"]: m["role"] for m in api.http.get(f"{api.o}/members").json()["members"]}
    assert roles["rita@example.com"] == "operator"
    assert ui.close() == []


def test_edit_forms_save_and_the_server_holds_the_new_values(
    ui: UI, server: LiveServer, api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, MAIN)
    other = make_stack_repo(tmp_path / "other", MAIN)
    api.create_stack("web", repo)
    made = api.http.post(
        f"{api.o}/notifications",
        json={"name": "ops", "url": f"{server.url}/hooks/one", "events": ["run.failed"]},
    )
    assert made.status_code == 201, made.text
    destination = made.json()["id"]
    cli_token(server, "rita@example.com", "reader")

    page = ui.open()
    ui.sign_in(page, tenant.token, "/orgs/acme/stacks/web/settings")
    source = page.get_by_role("form", name="Repository, branch and path")
    source.get_by_label(re.compile("^Repository")).fill(other.url)
    source.get_by_label("Branch").fill("release")
    source.get_by_label(re.compile("^Path")).fill("infra/live")
    source.get_by_role("button", name="Save repository, branch and path").click()
    expect(source.get_by_test_id("saved")).to_have_text("✓ Saved")
    ui.check_screen(page, "desktop-stack-source-saved")
    stack = api.http.get(f"{api.o}/stacks/web").json()
    assert (stack["repository"], stack["branch"], stack["path"]) == (other.url, "release", "infra/live")

    page.goto("/orgs/acme/notifications")
    card = page.locator(".destination", has_text="/hooks/one")
    card.get_by_role("button", name="Edit").click()
    form = page.get_by_role("form", name="Edit ops")
    form.get_by_label("Name").fill("ops-eu")
    form.get_by_label("URL").fill(f"{server.url}/hooks/two")
    form.get_by_label("run.applied").check()
    form.get_by_role("button", name="Save destination").click()
    expect(form.get_by_test_id("saved")).to_have_text("✓ Saved")
    ui.check_screen(page, "desktop-notification-edit")
    saved = api.http.get(f"{api.o}/notifications/{destination}").json()
    assert (saved["name"], saved["url"]) == ("ops-eu", f"{server.url}/hooks/two")
    assert set(saved["events"]) == {"run.failed", "run.applied"}

    # Deleting it is undo-free: its name is typed first.
    card = page.locator(".destination", has_text="/hooks/two")
    card.get_by_role("button", name="Delete destination…").click()
    deleting = card.get_by_test_id("confirm-delete")
    expect(deleting.get_by_role("button", name="Delete the destination")).to_be_disabled()
    deleting.get_by_label("Type ops-eu to confirm").fill("ops-eu")
    ui.check_screen(page, "desktop-notification-delete-typed")
    deleting.get_by_role("button", name="Keep it").click()
    expect(card.get_by_test_id("confirm-delete")).to_have_count(0)
    assert api.http.get(f"{api.o}/notifications/{destination}").status_code == 200

    # The same forms on a phone: they fit, and pass axe-core.
    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, "/orgs/acme/stacks/web/settings")
    expect(
        phone.get_by_role("form", name="Repository, branch and path").get_by_label("Branch")
    ).to_have_value("release")
    ui.check_screen(phone, "phone-stack-source")
    phone.goto("/orgs/acme/notifications")
    phone.locator(".destination").get_by_role("button", name="Edit").click()
    expect(phone.get_by_role("form", name="Edit ops-eu").get_by_label("Name")).to_have_value("ops-eu")
    ui.check_screen(phone, "phone-notification-edit")

    page.goto("/orgs/acme/members")
    row = page.locator('[data-member="rita@example.com"]')
    row.get_by_label("Groups of rita@example.com").fill("sre, dba")
    row.get_by_role("button", name="Save").click()
    expect(row.get_by_test_id("confirm-change")).to_contain_text("groups to sre, dba")
    row.get_by_test_id("confirm-change").get_by_role("button", name="Save").click()
    expect(row.get_by_test_id("saved")).to_have_text("✓ Saved")
    groups = {m["email"]: m["groups"] for m in api.http.get(f"{api.o}/members").json()["members"]}
    assert sorted(groups["rita@example.com"]) == ["dba", "sre"]

    # Tokens: this browser's own is marked; a new one has a Copy button that copies it.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    for size in ("desktop", "phone"):
        tokens = page if size == "desktop" else ui.open(ui.sizes["phone"])
        if size == "phone":
            tokens.context.grant_permissions(["clipboard-read", "clipboard-write"])
            ui.sign_in(tokens, tenant.token, "/orgs/acme/tokens")
        else:
            tokens.goto("/orgs/acme/tokens")
        expect(tokens.get_by_test_id("this-browser")).to_have_count(1)
        tokens.get_by_label("Token name").fill(f"ci-{size}")
        tokens.get_by_role("button", name="Create token").click()
        shown = tokens.get_by_test_id("new-token")
        expect(shown).to_contain_text("fl_")
        shown.get_by_role("button", name="Copy").click()
        expect(shown.get_by_test_id("copied")).to_have_text("✓ Copied")
        assert tokens.evaluate("() => navigator.clipboard.readText()") == shown.locator("code").inner_text()
        # The new token is not this browser's: still one marked row.
        expect(tokens.locator(f'[data-token="ci-{size}"]').get_by_test_id("this-browser")).to_have_count(0)
        expect(tokens.get_by_test_id("this-browser")).to_have_count(1)
        ui.check_screen(tokens, f"{size}-tokens-copy")
        # Revoking asks for the token's name; the question fits the row at both sizes.
        tokens.get_by_role("button", name=f"Revoke ci-{size}").click()
        revoking = tokens.get_by_test_id("confirm-delete")
        expect(revoking).to_contain_text(f"Type ci-{size} to confirm")
        expect(revoking.get_by_role("button", name="Revoke the token")).to_be_disabled()
        ui.check_screen(tokens, f"{size}-tokens-revoke-typed")
        revoking.get_by_role("button", name="Keep it").click()
    assert ui.close() == []
