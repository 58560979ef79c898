"""Browser: the log viewer on a 100,000-line log: it renders (time to first paint printed), keeps
only the visible lines in the document, scrolls, shows ANSI colours and one section per step,
finds a line and navigates between matches, and downloads exactly the bytes the REST route serves.

The log is written through the executor API by the test itself (the scheduler is off), as an
executor would ship it. Pinned to SQLite like the other browser tests."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
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

LINES = 100_000
# Every 10,000th line says "needle", so a search has several matches to move between.
NEEDLES = [n for n in range(LINES) if n % 10_000 == 5_000]
GREEN = "\x1b[32m"
RESET = "\x1b[0m"


def plan_line(n: int) -> str:
    if n in NEEDLES:
        return f"line {n:06d} \x1b[1m\x1b[31mneedle\x1b[0m in the plan output\n"
    return f"line {n:06d} of the plan output\n"


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    env = settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off")
    served = start_live_server(env, tmp_path / "server.log")
    yield served
    stop_live_server(served)


class Executor:
    """The plan phase's executor, as far as steps and the log go."""

    def __init__(self, server: LiveServer, token: str) -> None:
        self.http = httpx.Client(
            base_url=f"{server.url}/api/v1/executor", headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
        self.offset = 0

    def step(self, name: str, status: str) -> None:
        response = self.http.post("/steps", content=json.dumps({"name": name, "status": status}))
        assert response.status_code == 204, response.text

    def log(self, step: str, text: str) -> None:
        response = self.http.post(
            "/logs", content=json.dumps({"offset": self.offset, "step": step, "text": text})
        )
        assert response.status_code == 200, response.text
        self.offset = response.json()["next_offset"]


@pytest.fixture
def long_run(server: LiveServer, api: Api, ctx: Context) -> Iterator[str]:
    # Written before the browser starts: Playwright's sync API and asyncio.run cannot share a thread.
    api.http.post(f"{api.o}/stacks", content=json.dumps({"slug": "big", "repository": "file:///repo"}))
    run_id = api.start("big", "plan")
    [launch] = asyncio.run(dispatch.claim_plans(ctx))
    executor = Executor(server, launch.token)
    executor.step("checkout", "running")
    executor.log("checkout", f"Cloning file:///repo\n{GREEN}Checked out{RESET} abc1234: the commit\n")
    executor.step("checkout", "done")
    executor.step("plan", "running")
    for first in range(0, LINES, 10_000):
        executor.log("plan", "".join(plan_line(n) for n in range(first, first + 10_000)))
    executor.step("plan", "done")
    yield run_id
    executor.http.close()


def rendered_rows(page: Page) -> int:
    return page.get_by_test_id("log").locator(".log-line").count()


def fully_visible_in_log(page: Page, row_selector: str) -> bool:
    return page.evaluate(
        """(selector) => {
            const box = document.querySelector('[data-testid=log]').getBoundingClientRect();
            const row = document.querySelector(selector);
            if (!row) return false;
            const r = row.getBoundingClientRect();
            return r.top >= box.top && r.bottom <= box.bottom;
        }""",
        row_selector,
    )


def test_a_log_of_100000_lines_renders_scrolls_searches_and_downloads_exactly(
    long_run: str, ui: UI, tenant: Tenant, api: Api
) -> None:
    # The log was written by the fixture, just before: its times are from the last few minutes.
    written_from = datetime.now(UTC) - timedelta(minutes=10)
    page = ui.open()
    ui.sign_in(page, tenant.token)
    started = time.monotonic()
    page.goto(f"/orgs/{tenant.org}/runs/{long_run}/logs")
    log = page.get_by_role("log", name="Run log")
    # First paint: the whole log has arrived and its end is on screen (the view follows the end).
    expect(page.get_by_text(f"{LINES + 2:,} lines")).to_be_visible()
    expect(log.locator(f'.log-line[data-line="{LINES}"]')).to_contain_text(f"line {LINES - 1:06d}")
    first_paint = time.monotonic() - started
    print(
        f"\nlog viewer: first paint of a {LINES:,}-line log: {first_paint * 1000:.0f} ms (navigation to last line shown)"
    )
    assert fully_visible_in_log(page, f'[data-testid=log] .log-line[data-line="{LINES}"]'), (
        "the last line is hidden"
    )
    # Only what is on screen (and a margin) is in the document.
    assert 0 < rendered_rows(page) < 300

    # Scrolling: the middle of the log is drawn where the reader scrolls to.
    log.evaluate("el => { el.scrollTop = el.scrollHeight / 2; el.dispatchEvent(new Event('scroll')); }")
    expect(log.locator(".log-line").filter(has_text="line 050000 of the plan output")).to_have_count(1)
    assert rendered_rows(page) < 300
    expect(page.get_by_role("button", name="↓ Follow the end")).to_be_visible()

    # The top: the first section's header and first line are not hidden under the bar.
    log.evaluate("el => { el.scrollTop = 0; el.dispatchEvent(new Event('scroll')); }")
    checkout = log.locator('[data-log-section="checkout"]')
    expect(checkout).to_contain_text("checkout")
    expect(checkout).to_contain_text("done")
    assert fully_visible_in_log(page, '[data-testid=log] [data-log-section="checkout"]')
    # Each line shows when it reached the server (the time its chunk was stored).
    first_time = log.locator('.log-line[data-line="1"] time.ts').first  # checkout's first line
    expect(first_time).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
    stamped = datetime.fromisoformat(first_time.get_attribute("datetime").replace("Z", "+00:00"))
    assert written_from <= stamped <= datetime.now(UTC), (written_from, stamped)
    last_time = log.locator(f'.log-line[data-line="{LINES}"] time.ts')  # the plan's last line
    log.evaluate("el => { el.scrollTop = el.scrollHeight; el.dispatchEvent(new Event('scroll')); }")
    expect(last_time).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
    assert datetime.fromisoformat(last_time.get_attribute("datetime").replace("Z", "+00:00")) >= stamped
    log.evaluate("el => { el.scrollTop = 0; el.dispatchEvent(new Event('scroll')); }")
    # ANSI colours are rendered, not shown as escape codes.
    expect(log.locator(".ansi-green-fg")).to_have_text("Checked out")
    assert "\x1b" not in log.inner_text()
    ui.check_screen(page, "desktop-log-100k")

    # Search: one line among 100,000, shown in the middle of the view and marked.
    search = page.get_by_label("Search the log")
    search.fill("line 054321")
    expect(page.get_by_test_id("match-count")).to_have_text("1 of 1")
    target = '[data-testid=log] .log-line[data-line="54322"]'
    expect(page.locator(target)).to_contain_text("line 054321 of the plan output")
    expect(page.locator(target).locator("mark.current")).to_have_text("line 054321")
    assert fully_visible_in_log(page, target)

    # Several matches: Enter and the arrows move between them, in both directions.
    search.fill("needle")
    expect(page.get_by_test_id("match-count")).to_have_text(f"1 of {len(NEEDLES)}")
    current = log.locator("mark.current")
    expect(current.locator("xpath=ancestor::div[contains(@class,'log-line')]")).to_have_attribute(
        "data-line", str(NEEDLES[0] + 1)
    )
    search.press("Enter")
    expect(page.get_by_test_id("match-count")).to_have_text(f"2 of {len(NEEDLES)}")
    expect(current.locator("xpath=ancestor::div[contains(@class,'log-line')]")).to_have_attribute(
        "data-line", str(NEEDLES[1] + 1)
    )
    # The needle is red and bold in the log: colours survive the highlight.
    expect(current.locator(".ansi-red-fg")).to_have_text("needle")
    page.get_by_role("button", name="Previous match").click()
    page.get_by_role("button", name="Previous match").click()
    expect(page.get_by_test_id("match-count")).to_have_text(f"{len(NEEDLES)} of {len(NEEDLES)}")
    expect(current.locator("xpath=ancestor::div[contains(@class,'log-line')]")).to_have_attribute(
        "data-line", str(NEEDLES[-1] + 1)
    )

    # Sections collapse and open again.
    search.fill("")
    log.evaluate("el => { el.scrollTop = 0; el.dispatchEvent(new Event('scroll')); }")
    plan_header = log.locator('[data-log-section="plan"]').get_by_role("button")
    expect(plan_header).to_have_attribute("aria-expanded", "true")
    plan_header.click()
    expect(plan_header).to_have_attribute("aria-expanded", "false")
    expect(log.locator(".log-line")).to_have_count(2)  # only checkout's lines are left
    plan_header.click()
    expect(log.locator(".log-line").filter(has_text="line 000000 of the plan output")).to_have_count(1)

    # Download: exactly the bytes the REST route returns.
    with page.expect_download() as downloading:
        page.get_by_role("button", name="Download raw log").click()
    download = downloading.value
    assert download.suggested_filename == "big-run-1.log"
    stored = api.http.get(f"{api.o}/runs/{long_run}/logs").content
    assert len(stored) > 3_000_000
    assert Path(download.path()).read_bytes() == stored

    # On a phone: the same log, its end in view, nothing scrolling the page sideways (the log
    # box scrolls its long lines itself).
    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, f"/orgs/{tenant.org}/runs/{long_run}/logs")
    expect(phone.get_by_text(f"{LINES + 2:,} lines")).to_be_visible()
    expect(
        phone.get_by_role("log", name="Run log").locator(f'.log-line[data-line="{LINES}"]')
    ).to_be_visible()
    ui.check_screen(phone, "phone-log-100k")
