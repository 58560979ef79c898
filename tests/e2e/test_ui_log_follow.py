"""Browser: the Logs view follows the end of a live log unless the reader scrolls up, and
follows again when asked.

The log is written through the executor API by the test itself (the scheduler is off), so the
test decides when each line arrives. Pinned to SQLite like the other browser tests."""

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


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    env = settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off")
    served = start_live_server(env, tmp_path / "server.log")
    yield served
    stop_live_server(served)


class LogWriter:
    """The plan phase's executor, as far as the log goes."""

    def __init__(self, server: LiveServer, token: str) -> None:
        self.http = httpx.Client(
            base_url=f"{server.url}/api/v1/executor", headers={"Authorization": f"Bearer {token}"}
        )
        self.offset = 0

    def lines(self, first: int, count: int) -> None:
        text = "".join(f"line {n:05d} of the plan output\n" for n in range(first, first + count))
        response = self.http.post(
            "/logs", content=json.dumps({"offset": self.offset, "step": "plan", "text": text})
        )
        assert response.status_code == 200, response.text
        self.offset = response.json()["next_offset"]


@pytest.fixture
def writer(server: LiveServer, api: Api, ctx: Context) -> Iterator[tuple[str, LogWriter]]:
    # Created before the browser starts: Playwright's sync API and asyncio.run cannot share a thread.
    api.http.post(f"{api.o}/stacks", content=json.dumps({"slug": "app", "repository": "file:///repo"}))
    run_id = api.start("app", "plan")
    [launch] = asyncio.run(dispatch.claim_plans(ctx))
    log_writer = LogWriter(server, launch.token)
    assert log_writer.http.post("/steps", content='{"name": "plan", "status": "running"}').status_code == 204
    yield run_id, log_writer
    log_writer.http.close()


def _distance_from_end(page: Page) -> float:
    return page.get_by_test_id("log").evaluate("el => el.scrollHeight - el.scrollTop - el.clientHeight")


def test_the_log_follows_the_end_until_the_reader_scrolls_up(
    writer: tuple[str, LogWriter], ui: UI, tenant: Tenant
) -> None:
    run_id, log = writer
    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}/logs")
    log.lines(0, 400)
    expect(page.get_by_text("400 lines")).to_be_visible()
    expect(page.get_by_test_id("log")).to_contain_text("line 00399 of the plan output")
    assert _distance_from_end(page) < 32  # following the end

    # The reader scrolls up to read: new lines arrive, the view stays where the reader is.
    page.get_by_test_id("log").evaluate("el => { el.scrollTop = 0; el.dispatchEvent(new Event('scroll')); }")
    follow = page.get_by_role("button", name="↓ Follow the end")
    expect(follow).to_be_visible()
    log.lines(400, 300)
    expect(page.get_by_text("700 lines")).to_be_visible()
    assert page.get_by_test_id("log").evaluate("el => el.scrollTop") == 0
    assert _distance_from_end(page) > 1000

    # Asked to follow again, it jumps to the end and stays there as lines arrive.
    follow.click()
    expect(follow).to_be_hidden()
    log.lines(700, 100)
    expect(page.get_by_text("800 lines")).to_be_visible()
    expect(page.get_by_test_id("log")).to_contain_text("line 00799 of the plan output")
    page.wait_for_function(
        "() => { const el = document.querySelector('[data-testid=log]');"
        " return el.scrollHeight - el.scrollTop - el.clientHeight < 32; }"
    )
    assert ui.screenshot(page, "run-logs-live").exists()
