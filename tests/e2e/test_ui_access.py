"""Browser: the approval panel says who may approve and disables the buttons for others with the
reason; the Members page (roles, groups); the Tokens page (create, shown once, revoke); the
settings page edits approvers and forbid_self_approval with the inherited value and its origin.

Pinned to SQLite like the other browser tests."""

from __future__ import annotations

import os
import subprocess
import sys
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

MAIN = 'resource "terraform_data" "a" { input = "a" }\n'


def cli_token(server: LiveServer, email: str, role: str) -> str:
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "firstlume",
            "token",
            "create",
            "--org",
            "acme",
            "--user",
            email,
            "--role",
            role,
        ],
        env={**os.environ, **server.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return made.stdout.strip()


def test_the_approval_panel_says_who_may_approve_and_disables_the_buttons_for_others(
    ui: UI, server: LiveServer, api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    api.settings("", {"approvers": ["group:sre"], "forbid_self_approval": True})
    api.create_stack("web", make_stack_repo(tmp_path, MAIN))
    run_id = api.start("web", "apply")
    api.wait(run_id, "awaiting_approval")
    bob = cli_token(server, "bob@example.com", "operator")
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
        panel = page.get_by_test_id("approval")
        expect(panel.get_by_test_id("who-may-approve")).to_contain_text(
            "Who may approve: group:sre (set by the organization)"
        )
        expect(panel.get_by_test_id("who-may-approve")).to_contain_text("not the person who started the run")
        expect(panel.get_by_test_id("cannot-approve")).to_contain_text(
            "only group:sre may decide on this run"
        )
        expect(panel.get_by_role("button", name="Approve")).to_be_disabled()
        expect(panel.get_by_role("button", name="Discard")).to_be_disabled()
        ui.check_screen(page, f"{size}-approval-not-an-approver")

    # The starter is refused by forbid_self_approval, said in words.
    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/acme/runs/{run_id}")
    expect(page.get_by_test_id("cannot-approve")).to_contain_text("group:sre")
    api.http.put(f"{api.o}/members/{tenant.email}", json={"role": "admin", "groups": ["sre"]})
    page.reload()
    expect(page.get_by_test_id("cannot-approve")).to_contain_text(
        "you started this run and forbid_self_approval is on"
    )
    expect(page.get_by_role("button", name="Approve")).to_be_disabled()
    expect(page.get_by_role("button", name="Discard")).to_be_enabled()

    # A member of the group approves.
    page = ui.open()
    ui.sign_in(page, sam, f"/orgs/acme/runs/{run_id}")
    expect(page.get_by_test_id("cannot-approve")).to_have_count(0)
    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("approved-by")).to_have_text("sam@example.com")
    assert not ui.close()


def test_members_tokens_and_approver_settings_pages(
    ui: UI, server: LiveServer, api: Api, tenant: Tenant
) -> None:
    reader = cli_token(server, "rita@example.com", "reader")
    page = ui.open()
    ui.sign_in(page, tenant.token, "/orgs/acme/members")
    members = page.get_by_test_id("members")
    expect(page.get_by_label("Groups of ada@example.com")).to_have_value("")
    page.get_by_label("Email", exact=True).fill("sam@example.com")
    page.get_by_label("Role", exact=True).select_option("operator")
    page.get_by_label("Groups", exact=True).fill("sre, dba")
    page.get_by_role("button", name="Save member").click()
    expect(page.get_by_label("Groups of sam@example.com")).to_have_value("dba, sre")
    # A role change is picked, then saved after a confirmation that says what changes.
    rita = members.locator('[data-member="rita@example.com"]')
    page.get_by_label("Role of rita@example.com").select_option("operator")
    assert {m["email"]: m["role"] for m in api.http.get(f"{api.o}/members").json()["members"]}[
        "rita@example.com"
    ] == "reader"  # nothing saved on the pick
    rita.get_by_role("button", name="Save").click()
    confirm = rita.get_by_test_id("confirm-change")
    expect(confirm).to_contain_text("role from reader to operator")
    confirm.get_by_role("button", name="Save").click()
    expect(rita.get_by_test_id("saved")).to_have_text("✓ Saved")
    expect(page.get_by_label("Role of rita@example.com")).to_have_value("operator")
    assert {m["email"]: m["role"] for m in api.http.get(f"{api.o}/members").json()["members"]}[
        "rita@example.com"
    ] == "operator"
    ui.check_screen(page, "desktop-members")
    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, "/orgs/acme/members")
    expect(phone.get_by_test_id("members")).to_be_visible()
    ui.check_screen(phone, "phone-members")

    # A non-admin sees the members, and cannot change them.
    other = ui.open()
    ui.sign_in(other, reader, "/orgs/acme/members")
    expect(other.get_by_test_id("members-readonly")).to_be_visible()
    expect(other.get_by_label("Role of sam@example.com")).to_be_disabled()

    # Tokens: created with a name and an expiry, shown once, revoked.
    page.goto("/orgs/acme/tokens")
    page.get_by_label("Token name").fill("ci")
    page.get_by_label("Expires in").select_option("7d")
    page.get_by_role("button", name="Create token").click()
    shown = page.get_by_test_id("new-token")
    expect(shown).to_contain_text("fl_")
    token = shown.locator("code").inner_text()
    row = page.locator('[data-token="ci"]')
    expect(row).to_be_visible()
    assert token not in row.inner_text()
    ui.check_screen(page, "desktop-tokens")
    phone.goto("/orgs/acme/tokens")
    expect(phone.locator('[data-token="ci"]')).to_be_visible()
    ui.check_screen(phone, "phone-tokens")
    assert api.http.get(f"{api.o}/stacks", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    page.get_by_role("button", name="Revoke ci").click()
    revoking = page.get_by_test_id("confirm-delete")
    expect(revoking.get_by_role("button", name="Revoke the token")).to_be_disabled()
    revoking.get_by_label("Type ci to confirm").fill("ci")
    revoking.get_by_role("button", name="Revoke the token").click()
    expect(page.locator('[data-token="ci"]')).to_have_count(0)
    assert api.http.get(f"{api.o}/stacks", headers={"Authorization": f"Bearer {token}"}).status_code == 401

    # Settings: approvers and forbid_self_approval, with the inherited value and its origin.
    api.http.post(f"{api.o}/folders", json={"path": "prod"})
    page.goto("/orgs/acme/settings")
    approvers = page.locator('[data-setting="approvers"]')
    expect(approvers.get_by_test_id("effective")).to_contain_text("any operator or admin")
    approvers.get_by_label("approvers").fill("group:sre, user:ada@example.com")
    page.locator('[data-setting="forbid_self_approval"]').get_by_role("radio", name="On").click()
    page.get_by_role("button", name="Save approval rules").click()
    page.get_by_test_id("confirm-change").get_by_role("button", name="Save").click()
    expect(page.locator(".approval-rules").get_by_test_id("saved")).to_have_text("✓ Saved")
    expect(approvers.get_by_test_id("effective")).to_contain_text("group:sre, user:ada@example.com")
    expect(approvers.get_by_test_id("effective")).to_contain_text("set on the organization")
    expect(page.locator('[data-setting="forbid_self_approval"]').get_by_test_id("effective")).to_contain_text(
        "on"
    )
    ui.check_screen(page, "desktop-settings-approvers")
    page.goto("/orgs/acme/folders/prod")
    inherited = page.locator('[data-setting="approvers"]').get_by_test_id("effective")
    expect(inherited).to_contain_text("group:sre, user:ada@example.com")
    expect(inherited).to_contain_text("inherited from organization")
    expect(page.locator('[data-setting="forbid_self_approval"]').get_by_test_id("effective")).to_contain_text(
        "inherited from organization"
    )
    phone.goto("/orgs/acme/folders/prod")
    expect(phone.locator('[data-setting="approvers"]')).to_be_visible()
    ui.check_screen(phone, "phone-settings-approvers")
    settings = api.http.get(f"{api.o}/settings").json()
    assert settings["explicit"]["approvers"] == ["group:sre", "user:ada@example.com"]
    assert settings["explicit"]["forbid_self_approval"] is True
    assert not ui.close()
