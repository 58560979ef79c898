"""Browser: every page of the app renders for a reader and for an operator without an error
state (issue 48, item 1): a field a role may not read (a state's outputs need operator) hides
that part alone, with a sentence saying who may see it, and an admin-only page (notifications,
audit) says so instead of failing. Each page passes axe-core and fits the width at a laptop's and
a phone's size, and so does the phone's menu with its current item (item 4: it was 1.13:1).

Pinned to SQLite like the other browser tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import Page, expect

from conftest import LiveServer, Tenant
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = [requires_terraform, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

MAIN = """
resource "terraform_data" "a" { input = "a" }
output "endpoint" { value = "https://example.test" }
"""


def role_token(server: LiveServer, role: str) -> str:
    """A member with `role` and their token, made with the CLI as an operator of the server would."""
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
            f"{role}@example.com",
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


@pytest.fixture
def applied(api: Api, tmp_path: Path) -> str:
    """A stack in a folder, applied once (so it has state with an output and a finished run)."""
    repo = make_stack_repo(tmp_path, MAIN)
    repo.commit({"backend.tf": None}, "Keep the state in Firstlume")  # its managed state, with outputs
    api.create_stack("web", repo, folder="prod")
    api.settings("", {"require_approval": False})
    run_id = api.start("web", "apply")
    api.wait(run_id, "applied")
    return run_id


def pages(org: str, run_id: str) -> list[tuple[str, str]]:
    """Every route of the app (frontend/src/App.tsx), with a name for its screenshot."""
    return [
        ("stacks", f"/orgs/{org}/stacks"),
        ("stack", f"/orgs/{org}/stacks/web"),
        ("stack-state", f"/orgs/{org}/stacks/web/state"),
        ("stack-drift", f"/orgs/{org}/stacks/web/drift"),
        ("stack-settings", f"/orgs/{org}/stacks/web/settings"),
        ("drift", f"/orgs/{org}/drift"),
        ("notifications", f"/orgs/{org}/notifications"),
        ("run", f"/orgs/{org}/runs/{run_id}"),
        ("run-steps", f"/orgs/{org}/runs/{run_id}/steps"),
        ("run-logs", f"/orgs/{org}/runs/{run_id}/logs"),
        ("run-configuration", f"/orgs/{org}/runs/{run_id}/configuration"),
        ("settings", f"/orgs/{org}/settings"),
        ("git", f"/orgs/{org}/git"),
        ("members", f"/orgs/{org}/members"),
        ("tokens", f"/orgs/{org}/tokens"),
        ("audit", f"/orgs/{org}/audit"),
        ("folder", f"/orgs/{org}/folders/prod"),
    ]


def expect_no_error_state(page: Page, name: str) -> None:
    """The page has rendered (a heading, nothing loading) and shows no error or not-found."""
    main = page.locator("main")
    expect(main.locator("h1").first).to_be_visible()
    expect(main.locator(".loading")).to_have_count(0)
    expect(main.get_by_test_id("not-found"), name).to_have_count(0)
    expect(main.locator(".alert-danger"), name).to_have_count(0)
    expect(main, name).not_to_contain_text("There is no")


@pytest.mark.parametrize("role", ["reader", "operator"])
@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_every_page_renders_for_the_role_without_an_error_state(
    role: str, size: str, ui: UI, server: LiveServer, tenant: Tenant, applied: str
) -> None:
    token = role_token(server, role)
    page = ui.open(ui.sizes[size])
    ui.sign_in(page, token, f"/orgs/{tenant.org}/stacks")
    for name, path in pages(tenant.org, applied):
        page.goto(path)
        expect_no_error_state(page, f"{role} {name}")
        if name == "stack-state":
            expect(page.get_by_test_id("state-serial")).not_to_have_text("—")
            # Resources are names, not values: every role that reads the state lists them.
            expect(page.locator(".resources-table")).to_contain_text("terraform_data.a")
            if role == "reader":
                expect(page.get_by_test_id("outputs-hidden")).to_contain_text(
                    "Outputs are visible to operators and admins"
                )
            else:
                expect(page.locator(".outputs-table")).to_contain_text("endpoint")
                expect(page.get_by_test_id("outputs-hidden")).to_have_count(0)
        if name in ("notifications", "audit"):
            # Admin-only pages say so, in place of the list, for both roles.
            notice = page.get_by_test_id("role-notice")
            expect(notice).to_contain_text("admins only")
            expect(notice).to_contain_text(f"you are {'a' if role == 'reader' else 'an'} {role}")
        ui.check_screen(page, f"{size}-{role}-{name}")

    if size == "phone":
        # The menu on a phone, open on a page it lists: its current item is readable.
        page.goto(f"/orgs/{tenant.org}/drift")
        expect_no_error_state(page, "drift")
        page.get_by_role("button", name="Menu").click()
        current = page.get_by_role("navigation", name="Main (menu)").locator('a[aria-current="page"]')
        expect(current).to_have_text("Drift")
        ui.check_screen(page, f"{size}-{role}-menu")
