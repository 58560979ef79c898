"""Browser: log lines wrap by default on every log view (issue 48, item 2). On a phone, a
2,000-character line is wrapped into many rows of the view's width, its ANSI colours kept, the
lines after it drawn below it (its height is measured, not assumed), and a search finds its last
word on screen. A toggle turns wrapping off (the line scrolls sideways in the log, as before) and
this browser remembers the choice.

The log is written through the executor API by the test itself (the scheduler is off), as an
executor would ship it. Pinned to SQLite like the other browser tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from playwright.sync_api import Page, expect

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.e2e import Api

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

GREEN, RED, RESET = "\x1b[32m", "\x1b[31m", "\x1b[0m"
# 2,000 characters without a space (the worst case: nowhere to break but anywhere), coloured at
# both ends, ending in a word a search looks for.
LONG = f"{GREEN}Error:{RESET} " + "x" * 1_980 + f" {RED}LASTWORD{RESET}"
LONG_TEXT_LENGTH = len("Error: ") + 1_980 + len(" LASTWORD")


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    env = settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off")
    served = start_live_server(env, tmp_path / "server.log")
    yield served
    stop_live_server(served)


@pytest.fixture
def run_with_a_long_line(server: LiveServer, api: Api, ctx: Context) -> Iterator[str]:
    # Written before the browser starts: Playwright's sync API and asyncio.run cannot share a thread.
    api.http.post(f"{api.o}/stacks", content=json.dumps({"slug": "long", "repository": "file:///repo"}))
    run_id = api.start("long", "plan")
    [launch] = asyncio.run(dispatch.claim_plans(ctx))
    http = httpx.Client(
        base_url=f"{server.url}/api/v1/executor",
        headers={"Authorization": f"Bearer {launch.token}"},
        timeout=60,
    )
    offset = 0
    for name, status in [("checkout", "running"), ("checkout", "done"), ("plan", "running")]:
        assert http.post("/steps", content=json.dumps({"name": name, "status": status})).status_code == 204
    text = "Planning…\n" + LONG + "\nthe line after the long one\n"
    response = http.post("/logs", content=json.dumps({"offset": offset, "step": "plan", "text": text}))
    assert response.status_code == 200, response.text
    assert http.post("/steps", content=json.dumps({"name": "plan", "status": "done"})).status_code == 204
    yield run_id
    http.close()


def box(page: Page, selector: str) -> dict[str, float]:
    return page.locator(selector).evaluate(
        "el => { const r = el.getBoundingClientRect(); return { top: r.top, bottom: r.bottom, left: r.left, right: r.right, height: r.height }; }"
    )


def sideways(page: Page) -> int:
    """How far the log scrolls sideways (0 when it doesn't)."""
    return page.get_by_test_id("log").evaluate("el => el.scrollWidth - el.clientWidth")  # type: ignore[no-any-return]


def test_a_2000_character_line_wraps_on_a_phone_with_its_colours_and_search(
    run_with_a_long_line: str, ui: UI, tenant: Tenant
) -> None:
    page = ui.open(ui.sizes["phone"])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_with_a_long_line}/logs")
    log = page.get_by_test_id("log")
    long_row = '[data-testid=log] .log-line[data-line="2"]'
    expect(page.locator(long_row)).to_contain_text("LASTWORD")
    wrap = page.get_by_role("button", name="Wrap lines")
    expect(wrap).to_have_attribute("aria-pressed", "true")  # the default

    # Wrapped: nothing scrolls sideways, and the line is many rows of text tall (a phone's width
    # holds about 30 characters of log after the line number and time).
    assert sideways(page) <= 0
    rows = box(page, long_row)["height"] / 20
    assert rows >= LONG_TEXT_LENGTH / 60, f"the 2,000-character line is only {rows:.0f} rows tall"
    assert box(page, long_row)["right"] <= ui.sizes["phone"]["width"]
    # The next line is drawn below the long one, not over it: the row's height was measured.
    after = box(page, '[data-testid=log] .log-line[data-line="3"]')
    assert after["top"] >= box(page, long_row)["bottom"] - 0.5
    # Its colours are kept.
    expect(page.locator(long_row).locator(".ansi-green-fg")).to_have_text("Error:")
    expect(page.locator(long_row).locator(".ansi-red-fg")).to_have_text("LASTWORD")
    assert "\x1b" not in log.inner_text()
    ui.check_screen(page, "phone-log-wrapped")

    # Search finds the line's last word, on screen (wrapped into view, not off to the right).
    page.get_by_label("Search the log").fill("lastword")
    expect(page.get_by_test_id("match-count")).to_have_text("1 of 1")
    current = page.locator(long_row).locator("mark.current")
    expect(current).to_have_text("LASTWORD")
    expect(current).to_be_in_viewport()
    assert box(page, f"{long_row} mark.current")["right"] <= ui.sizes["phone"]["width"]
    page.get_by_label("Search the log").fill("")

    # Off: the line is one row and the log scrolls sideways; the choice survives a reload.
    wrap.click()
    expect(wrap).to_have_attribute("aria-pressed", "false")
    expect(page.locator(long_row)).to_have_js_property("offsetHeight", 20)
    assert sideways(page) > 1_000
    page.reload()
    expect(page.locator(long_row)).to_contain_text("LASTWORD")
    expect(page.get_by_role("button", name="Wrap lines")).to_have_attribute("aria-pressed", "false")
    expect(page.locator(long_row)).to_have_js_property("offsetHeight", 20)
    page.get_by_role("button", name="Wrap lines").click()
    expect(page.locator(long_row)).not_to_have_js_property("offsetHeight", 20)
    assert sideways(page) <= 0


def test_a_steps_own_log_wraps_too(run_with_a_long_line: str, ui: UI, tenant: Tenant) -> None:
    page = ui.open(ui.sizes["phone"])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_with_a_long_line}/steps?step=plan")
    log = page.get_by_role("log", name="Log of plan")
    long_row = log.locator('.log-line[data-line="2"]')
    expect(long_row).to_contain_text("LASTWORD")
    assert long_row.evaluate("el => el.offsetHeight") >= 20 * LONG_TEXT_LENGTH / 60
    assert log.evaluate("el => el.scrollWidth - el.clientWidth") <= 0
    ui.check_screen(page, "phone-step-log-wrapped")
