"""Browser: the run page for daily operations (issue 48, items 11, 13, 14): a comment given with
the approval, on the run and in the audit trail (rows naming the stack and run number, absolute
times on hover); the timing line with the approval wait apart; confirmation items that link to
their diffs and come before Approve in tab order; in a 200-resource review, the changes filter in
the address (it survives a reload) and Back/Forward returning to the place in the list.
Real Terraform, real Chromium, at 1440x900 and 390x844, axe-core on each state.

Pinned to SQLite: the browser tests exercise the UI, and the API beneath them already runs on
both databases in the rest of the suite; one dialect keeps these slower tests fast."""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import Page, expect

from conftest import Tenant
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform

if TYPE_CHECKING:
    from support.browser import UI

# The fixture `ui`.
pytest_plugins = ["support.browser"]
pytestmark = [requires_terraform, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

OLD = """
resource "terraform_data" "old" {
  count = 3
  input = "o-${count.index}"
}
"""
COMMENT = "CAB-1234: approved by the change board"
LONG_MESSAGE = "Retire the old ones " + "and say so at length, " * 12


def shown_duration(ms: int) -> str:
    """format.ts duration(): what the page writes for `ms` (JavaScript's toFixed and Math.round
    round the double's exact value half up)."""
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        step = Decimal("0.1") if seconds < 10 else Decimal("1")
        return f"{Decimal(seconds).quantize(step, ROUND_HALF_UP)} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min {math.floor(seconds % 60 + 0.5)} s"
    return f"{minutes // 60} h {minutes % 60} min"


def focused(page: Page) -> str:
    """What has the keyboard focus, as a test names it."""
    return str(
        page.evaluate(
            "() => { const el = document.activeElement;"
            " return el.getAttribute('aria-label') || el.dataset.testid || el.textContent.trim(); }"
        )
    )


def test_a_comment_given_with_the_approval_is_on_the_run_and_in_the_audit_trail(
    ui: UI, tenant: Tenant, api: Api, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, OLD)
    api.create_stack("cleanup", repo, name="Cleanup jobs")
    api.settings("", {"require_approval": False})
    unattended = api.start("cleanup", "apply")
    api.wait(unattended, "applied")
    api.settings("", {"require_approval": None, "confirm_destructive": True})
    repo.commit({"main.tf": 'resource "terraform_data" "kept" { input = "k" }\n'}, LONG_MESSAGE)
    run_id = api.start("cleanup", "apply")
    api.wait(run_id, "awaiting_approval")

    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    # The title and the crumbs name the stack by its name, not its slug.
    expect(page).to_have_title("Run #2 · Cleanup jobs · Stacks · Firstlume")
    approval = page.get_by_test_id("approval")
    boxes = [
        approval.get_by_role("checkbox", name=f"Confirm deleting terraform_data.old[{n}]") for n in range(3)
    ]
    for box in boxes:
        box.check()
    # Tab order: after the last box come its diff link, the comment, Discard, then Approve.
    boxes[-1].focus()
    order = []
    for _ in range(4):
        page.keyboard.press("Tab")
        order.append(focused(page))
    assert order == ["Diff of terraform_data.old[2]", "approval-comment", "Discard", "Approve"], order

    # Each confirmation item links to its diff: the changes, narrowed to it, scrolled to it.
    approval.get_by_role("link", name="Diff of terraform_data.old[1]").click()
    expect(page).to_have_url(re.compile(r"\?q=terraform_data\.old%5B1%5D#change-"))
    row = page.locator('[data-address="terraform_data.old[1]"]')
    expect(row).to_be_in_viewport()
    expect(page.get_by_label("Filter changes by text")).to_have_value("terraform_data.old[1]")
    page.go_back()
    expect(page.get_by_label("Filter changes by text")).to_have_value("")
    # The ticks are the page's own: still there.
    expect(approval.get_by_test_id("confirm-progress")).to_have_text("3 of 3 confirmed")

    # The long commit line is cut to one line, and whole after a click.
    message = page.get_by_test_id("commit-message").get_by_role("button")
    one_line = message.bounding_box()
    message.click()
    expect(message).to_have_attribute("aria-expanded", "true")
    assert message.bounding_box()["height"] > one_line["height"] * 1.5  # type: ignore[index]
    ui.check_screen(page, "desktop-approval-with-comment-field")

    # The wait for approval is long enough to be told apart (a condition, not a sleep).
    started = next(s for s in api.run(run_id)["steps"] if s["name"] == "approval")["started_at"]
    page.wait_for_function(f"() => Date.now() - Date.parse({started!r}) > 1500", timeout=10_000)
    approval.get_by_test_id("approval-comment").fill(COMMENT)
    approval.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("run-status")).to_have_text("applied", timeout=90_000)
    expect(page.get_by_test_id("decision-comment")).to_have_text(COMMENT)
    assert api.run(run_id)["comment"] == COMMENT

    # "took" leaves the wait out, and the line shows it apart: plan, waited, apply.
    run = api.run(run_id)
    waited = next(s for s in run["steps"] if s["name"] == "approval")["duration_ms"]
    assert waited >= 1500
    took = page.get_by_test_id("run-took")
    expect(took).to_contain_text(f"took {shown_duration(run['duration_ms'] - waited)} · ")
    expect(page.get_by_test_id("run-phases")).to_have_text(
        re.compile(rf"^ · plan [\d.]+ m?s, waited {re.escape(shown_duration(waited))}, apply [\d.]+ m?s$")
    )
    ui.check_screen(page, "desktop-approved-with-comment")

    # The audit trail: the approval names the stack and the run's number, with the comment.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Audit").click()
    entry = page.get_by_test_id("audit-entry").filter(has_text="run.approve")
    expect(entry).to_have_count(1)
    expect(entry.get_by_test_id("audit-run")).to_have_text("cleanup #2")
    expect(entry).to_contain_text(f"“{COMMENT}”")
    expect(entry.locator("time")).to_have_attribute("title", re.compile(r"\d{4}.*\d{1,2}:\d{2}"))
    ui.check_screen(page, "desktop-audit-run-comment")

    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    expect(phone.get_by_test_id("decision-comment")).to_have_text(COMMENT)
    expect(phone.get_by_test_id("run-phases")).to_contain_text("waited")
    ui.check_screen(phone, "phone-approved-with-comment")
    phone.goto(f"/orgs/{tenant.org}/audit?action=run.approve")
    expect(phone.get_by_test_id("audit-entry")).to_contain_text(COMMENT)
    ui.check_screen(phone, "phone-audit-run-comment")

    # A run that needed no approval: its skipped approval step shows no "0 ms", its timing no wait.
    assert [st["status"] for st in api.run(unattended)["steps"] if st["name"] == "approval"] == ["skipped"]
    phone.goto(f"/orgs/{tenant.org}/runs/{unattended}")
    expect(phone.locator('.step-strip [data-step="approval"]')).to_have_attribute(
        "data-step-status", "SKIPPED"
    )
    expect(phone.locator('.step-strip [data-step="approval"] .dur')).to_have_text("")
    expect(phone.get_by_test_id("run-phases")).to_have_text(
        re.compile(r"^ · plan [\d.]+ m?s, apply [\d.]+ m?s$")
    )


def test_the_comment_field_and_confirmations_pass_axe_on_a_phone(
    ui: UI, tenant: Tenant, api: Api, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, OLD)
    api.create_stack("cleanup", repo)
    api.settings("", {"require_approval": False})
    api.wait(api.start("cleanup", "apply"), "applied")
    api.settings("", {"require_approval": None, "confirm_destructive": True})
    repo.commit({"main.tf": ""}, "Remove everything")
    run_id = api.start("cleanup", "apply")
    api.wait(run_id, "awaiting_approval")
    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    approval = phone.get_by_test_id("approval")
    expect(approval.get_by_role("link", name="Diff of terraform_data.old[0]")).to_be_visible()
    approval.get_by_test_id("approval-comment").fill("Wrong window")
    ui.check_screen(phone, "phone-approval-with-comment-field")
    approval.get_by_role("button", name="Discard").click()
    expect(phone.get_by_test_id("run-status")).to_have_text("discarded")
    expect(phone.get_by_test_id("decision-comment")).to_have_text("Wrong window")
    ui.check_screen(phone, "phone-discarded-with-comment")


MANY = 'resource "terraform_data" "node" {\n  count = 200\n  input = "n-${count.index}"\n}\n'


def scroll_y(page: Page) -> int:
    return int(page.evaluate("() => Math.round(window.scrollY)"))


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_a_200_resource_review_keeps_its_filter_in_the_address_and_its_place_on_back(
    ui: UI, tenant: Tenant, api: Api, tmp_path: Path, size: str
) -> None:
    api.create_stack("fleet", make_stack_repo(tmp_path, MANY))
    run_id = api.start("fleet", "plan")
    api.wait(run_id, "planned", timeout=180)

    page = ui.open(ui.sizes[size])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    rows = page.locator("[data-address]")
    expect(rows).to_have_count(50)  # a page of the group
    # Only the groups the plan has something in: no empty "Will be deleted".
    expect(page.locator("section[data-group]")).to_have_count(1)
    # An address breaks between its names, not inside one.
    expect(page.locator('[data-address="terraform_data.node[7]"] .address wbr')).to_have_count(2)

    # The filter is in the address: a reload keeps it.
    page.get_by_label("Filter changes by text").fill("node[12")
    expect(page).to_have_url(re.compile(r"\?q=node%5B12$"))
    expect(page.get_by_test_id("filter-matches")).to_have_text("11 matches of 200")
    page.reload()
    expect(page.get_by_label("Filter changes by text")).to_have_value("node[12")
    expect(page.get_by_test_id("filter-matches")).to_have_text("11 matches of 200")
    expect(rows).to_have_count(11)
    ui.check_screen(page, f"{size}-review-filtered")
    page.get_by_label("Filter changes by text").fill("")
    expect(rows).to_have_count(50)

    # Deep in the list, away to another screen and Back: the same place, in the one scroll
    # container (the window).
    target = page.locator('[data-address="terraform_data.node[40]"]')
    target.evaluate("el => el.scrollIntoView({ block: 'start' })")
    page.wait_for_function("() => window.scrollY > 1000")
    place = scroll_y(page)
    if size == "phone":
        page.get_by_role("button", name="Menu").click()
        page.get_by_role("navigation", name="Main (menu)").get_by_role("link", name="Stacks").click()
    else:
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Stacks").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile("Stacks"))
    assert scroll_y(page) == 0  # a new screen starts at its top
    page.go_back()
    page.wait_for_function(f"() => Math.abs(window.scrollY - {place}) <= 2", timeout=10_000)
    expect(target).to_be_in_viewport()
    page.go_forward()
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile("Stacks"))
    page.go_back()
    page.wait_for_function(f"() => Math.abs(window.scrollY - {place}) <= 2", timeout=10_000)
    expect(target).to_be_in_viewport()
    ui.check_screen(page, f"{size}-review-restored")
