"""Browser: the live log of a real Terraform apply fills the window (issue 48, item 3). Watched
live on a laptop's window (1440×900) until the run ends, the log's last line and the apply's
summary with its outputs (pinned below the log) are on screen without scrolling; the log has a
full-screen mode (Escape leaves it) and a toolbar that stays in sight; on a phone the log takes
the rest of the screen, not a dozen lines.

Pinned to SQLite like the other browser tests."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import Page, expect

from conftest import Tenant
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = [requires_terraform, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

MAIN = """
resource "terraform_data" "web" {
  count = 12
  input = "web-${count.index}"
}
output "endpoint" { value = "https://web.example.test" }
output "instances" { value = length(terraform_data.web) }
"""


def rect(page: Page, selector: str) -> dict[str, float]:
    return page.locator(selector).evaluate(
        "el => { const r = el.getBoundingClientRect(); return { top: r.top, bottom: r.bottom, left: r.left, right: r.right }; }"
    )


def on_screen(page: Page, selector: str) -> bool:
    """Wholly inside the window and inside the log's visible box, with nothing scrolled away."""
    r = rect(page, selector)
    height = page.viewport_size["height"] if page.viewport_size else 0
    return r["top"] >= 0 and r["bottom"] <= height


@pytest.fixture
def stack(api: Api, tmp_path: Path) -> str:
    api.create_stack("web", make_stack_repo(tmp_path, MAIN))
    api.settings("", {"require_approval": False})
    return "web"


def test_when_a_run_ends_its_last_log_line_and_outputs_are_on_screen_without_scrolling(
    ui: UI, api: Api, tenant: Tenant, stack: str
) -> None:
    page = ui.open(ui.sizes["desktop"])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/stacks/{stack}")
    run_id = api.start(stack, "apply")
    page.goto(f"/orgs/{tenant.org}/runs/{run_id}/logs")
    # Live: the log is streaming while the run goes on.
    expect(page.get_by_test_id("run-status")).to_have_text("applied")
    expect(page.get_by_test_id("log-state")).to_have_text("end of log")
    last_line = [line for line in api.log(run_id).splitlines() if line.strip()][-1]
    assert last_line.startswith("instances = 12"), last_line  # the last output Terraform prints

    # The last line drawn is the log's last line, and it is on screen: the view followed the end.
    log = page.get_by_test_id("log")
    last_row = log.locator(".log-line").last
    expect(last_row).to_contain_text(last_line)
    # The pinned summary: what the apply did and its outputs.
    summary = page.get_by_test_id("apply-summary")
    expect(summary).to_contain_text("Apply complete! Resources: 12 added, 0 changed, 0 destroyed.")
    expect(summary).to_contain_text('endpoint = "https://web.example.test"')
    expect(summary).to_contain_text("instances = 12")
    page.wait_for_function(
        "() => { const el = document.querySelector('[data-testid=log]');"
        " return el.scrollHeight - el.scrollTop - el.clientHeight < 4; }"
    )
    # Nothing was scrolled, and nothing needs to be: the page is the window's height.
    scroll = page.evaluate(
        "() => { const el = document.scrollingElement;"
        " return { top: el.scrollTop, extra: el.scrollHeight - el.clientHeight }; }"
    )
    assert scroll == {"top": 0, "extra": 0}, scroll
    last_row.evaluate("el => el.setAttribute('data-last', '')")
    assert on_screen(page, "[data-testid=log] .log-line[data-last]"), rect(page, ".log-line[data-last]")
    log_box = rect(page, "[data-testid=log]")
    assert rect(page, ".log-line[data-last]")["bottom"] <= log_box["bottom"]
    assert on_screen(page, "[data-testid=apply-summary]"), rect(page, "[data-testid=apply-summary]")
    # The log fills the window: it ends at the window's bottom (less the page's margin).
    view = rect(page, ".log-view")
    assert 900 - 40 <= view["bottom"] <= 900, view
    ui.check_screen(page, "desktop-live-log-ended")

    # Full screen: the log alone over the whole window; Escape leaves it.
    page.get_by_role("button", name="Full screen").click()
    full = rect(page, ".log-view")
    assert full == {"top": 0, "bottom": 900, "left": 0, "right": 1440}, full
    expect(log.locator(".log-line").last).to_contain_text(last_line)
    ui.check_screen(page, "desktop-live-log-full-screen")
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name="Full screen")).to_have_attribute("aria-pressed", "false")
    assert rect(page, ".log-view")["top"] > 0


def test_on_a_phone_the_log_takes_the_rest_of_the_screen_and_its_toolbar_stays(
    ui: UI, api: Api, tenant: Tenant, stack: str
) -> None:
    run_id = api.start(stack, "apply")
    api.wait(run_id, "applied")
    page = ui.open(ui.sizes["phone"])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}/logs")
    expect(page.get_by_test_id("log-state")).to_have_text("end of log")
    expect(page.get_by_test_id("apply-summary")).to_contain_text("Apply complete!")
    log_box = rect(page, "[data-testid=log]")
    assert log_box["bottom"] - log_box["top"] >= 200, log_box  # more than a dozen lines of 20 px
    # Scrolled to the end of the page, the log's toolbar is still in sight above the log.
    page.evaluate("() => window.scrollTo(0, document.scrollingElement.scrollHeight)")
    bar = rect(page, ".log-bar")
    assert 0 <= bar["top"] and bar["bottom"] <= rect(page, "[data-testid=log]")["top"] + 1
    assert rect(page, ".log-view")["bottom"] <= 844
    ui.check_screen(page, "phone-live-log-ended")
