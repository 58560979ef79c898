"""Browser: why a queued run waits (the run holding the lock, named and linked, and its place in
the queue, on the run page and in the active-runs panel), who discarded or canceled a run, and a
stack's history filtered by status, type and trigger on the server, paged, with TOOK measured from
the first phase's start.

The runs are made through the REST and executor APIs by the test itself, with the scheduler off,
so they stay exactly where the test puts them: the first apply is planned by a scripted executor
and waits for approval (it holds the stack's lock), the rest are queued behind it. Pinned to
SQLite like the other browser tests."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from playwright.sync_api import Page, Request, expect
from sqlalchemy import select

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from firstlume.db.models import Stack
from firstlume.domain.runs import RunType, TriggerKind
from firstlume.services import dispatch, runs
from firstlume.services.commands import StartRun
from firstlume.services.context import Context
from firstlume.services.runs import Trigger
from support.e2e import Api
from support.executor_api import ExecutorReports

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

PLAN_JSON = {
    "format_version": "1.2",
    "resource_changes": [
        {
            "address": "terraform_data.web",
            "mode": "managed",
            "type": "terraform_data",
            "name": "web",
            "change": {
                "actions": ["create"],
                "before": None,
                "after": {"input": "web"},
                "after_unknown": {},
                "before_sensitive": False,
                "after_sensitive": {},
            },
        }
    ],
}
# Every test takes `queue` before `ui`: the browser starts after the runs are written.
# Plans beyond the first page of the history (25 runs a page).
EXTRA_PLANS = 25


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    env = settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off")
    served = start_live_server(env, tmp_path / "server.log")
    yield served
    stop_live_server(served)


@dataclass
class Queue:
    holder: str  # #1 apply, awaiting approval: holds the lock
    first: str  # #2 plan by a person, queued 1st
    scheduled: str  # #3 drift by the schedule, queued 2nd
    pushed: str  # #4 plan by a push, queued 3rd


async def plan_and_wait_for_approval(ctx: Context, server: LiveServer) -> None:
    [launch] = await dispatch.claim_plans(ctx)
    executor = ExecutorReports.served(server.url, launch.token)
    try:
        for step in ("checkout", "init"):
            await executor.step(step, "running")
            await executor.log(step, f"--- {step}\n{step} done\n")
            await executor.step(step, "done")
        await executor.step("plan", "running")
        await executor.log("plan", "--- plan\nPlan: 1 to add, 0 to change, 0 to destroy.\n")
        await executor.plan(PLAN_JSON)
        await executor.step("plan", "done")
        assert await executor.finish() == "awaiting_approval"
    finally:
        await executor.close()


async def start_by(ctx: Context, kind: TriggerKind, by: str, run_type: RunType) -> str:
    async with ctx.unit() as unit:
        stack = (await unit.session.scalars(select(Stack).where(Stack.slug == "web"))).one()
        trigger = Trigger(kind, by=by, commit="c" * 40 if kind is TriggerKind.PUSH else None)
        run = await runs.start_run(unit, None, stack, StartRun(type=run_type), trigger=trigger)
        return run.id


@pytest.fixture
def queue(server: LiveServer, api: Api, ctx: Context) -> Queue:
    # Written before the browser starts: Playwright's sync API and asyncio.run cannot share a thread.
    created = api.http.post(
        f"{api.o}/stacks", content=json.dumps({"slug": "web", "repository": "file:///repo"})
    )
    assert created.status_code == 201, created.text
    holder = api.start("web", "apply")
    asyncio.run(plan_and_wait_for_approval(ctx, server))
    assert api.run(holder)["status"] == "awaiting_approval"
    first = api.start("web", "plan")
    scheduled = asyncio.run(start_by(ctx, TriggerKind.SCHEDULE, "schedule", RunType.DRIFT))
    pushed = asyncio.run(start_by(ctx, TriggerKind.PUSH, "git:grace@example.com", RunType.PLAN))
    return Queue(holder=holder, first=first, scheduled=scheduled, pushed=pushed)


def test_a_queued_run_says_which_run_it_waits_for_and_who_canceled_or_discarded(
    queue: Queue, ui: UI, tenant: Tenant, api: Api
) -> None:
    org = tenant.org
    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{org}/runs/{queue.scheduled}")
    expect(page.get_by_test_id("run-status")).to_have_text("queued")
    waiting = page.locator(".run-head").get_by_test_id("waiting-for")
    expect(waiting).to_have_text(
        "Waiting for run #1 (apply, awaiting approval), which holds the stack's lock; number 2 in the stack's queue."
    )
    # The same in the active-runs panel: the stack's three queued runs are one entry, which says
    # once what they wait for, and each run's place in the queue.
    group = page.get_by_test_id("active-runs").locator('[data-testid="stack-queue"][data-stack="web"]')
    expect(group.get_by_test_id("stack-queue-count")).to_have_text("3 queued")
    expect(group.get_by_test_id("waiting-for")).to_have_text(
        "Waiting for run #1 (apply, awaiting approval), which holds the stack's lock."
    )
    expect(group.get_by_test_id("blocked-by")).to_have_attribute("href", f"/orgs/{org}/runs/{queue.holder}")
    entry = group.locator(f'li[data-run-id="{queue.scheduled}"]')
    expect(entry).to_contain_text("number 2")
    # Said once for the stack, not on each queued run's card.
    expect(page.get_by_test_id("active-runs").get_by_test_id("waiting-for")).to_have_count(1)
    expect(group.locator("li[data-run-id]")).to_have_count(3)
    ui.check_screen(page, "desktop-run-queued")
    # The name is a link to the run holding the lock.
    waiting.get_by_test_id("blocked-by").click()
    expect(page).to_have_url(re.compile(rf"/runs/{queue.holder}$"))
    expect(page.get_by_test_id("approval")).to_contain_text("This plan is waiting for approval")

    # Canceling the first in line: the page says who did, the others move up (live, in the panel).
    page.goto(f"/orgs/{org}/runs/{queue.first}")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.get_by_test_id("run-status")).to_have_text("canceled")
    expect(page.get_by_test_id("canceled-by")).to_have_text(tenant.email)
    expect(page.get_by_test_id("ended-by")).to_have_text(f"canceled by {tenant.email}")
    expect(entry).to_contain_text("next")
    expect(group.get_by_test_id("stack-queue-count")).to_have_text("2 queued")

    # Discarding the plan holding the lock: who discarded it; the queued run now waits for no run.
    page.goto(f"/orgs/{org}/runs/{queue.holder}")
    page.get_by_test_id("approval").get_by_role("button", name="Discard").click()
    expect(page.get_by_test_id("run-status")).to_have_text("discarded")
    expect(page.get_by_test_id("discarded-by")).to_have_text(tenant.email)
    expect(group.get_by_test_id("waiting-for")).to_have_text("Waiting to start.")
    expect(entry).to_contain_text("next")
    ui.check_screen(page, "desktop-run-discarded")
    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, f"/orgs/{org}/runs/{queue.holder}")
    expect(phone.get_by_test_id("discarded-by")).to_have_text(tenant.email)
    ui.check_screen(phone, "phone-run-discarded")

    # The API says the same: REST and GraphQL.
    assert api.run(queue.first)["ended_by"] == tenant.email
    assert api.run(queue.holder)["ended_by"] == tenant.email
    assert api.run(queue.scheduled)["ended_by"] is None
    query = """query($org: String!, $id: ID!) { organization(slug: $org) { run(id: $id) { endedBy } } }"""
    body = api.http.post(
        f"{api.o.split('/api/')[0]}/graphql",
        json={"query": query, "variables": {"org": org, "id": queue.holder}},
    ).json()
    assert body["data"]["organization"]["run"]["endedBy"] == tenant.email


def test_a_queued_run_on_a_phone_shows_what_it_waits_for_in_the_drawer(
    queue: Queue, ui: UI, tenant: Tenant
) -> None:
    page = ui.open(ui.sizes["phone"])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{queue.pushed}")
    expect(page.locator(".run-head").get_by_test_id("waiting-for")).to_contain_text(
        "Waiting for run #1 (apply, awaiting approval), which holds the stack's lock; number 3 in the stack's queue."
    )
    ui.check_screen(page, "phone-run-queued")
    page.get_by_test_id("active-runs-button").click()
    drawer = page.get_by_role("dialog", name="Active runs")
    group = drawer.locator('[data-testid="stack-queue"][data-stack="web"]')
    expect(group.locator(f'li[data-run-id="{queue.pushed}"]')).to_contain_text("number 3")
    expect(group.get_by_test_id("waiting-for")).to_have_count(1)
    ui.check_screen(page, "phone-active-runs-waiting")


def stack_page_variables(requests: list[Request]) -> list[dict[str, Any]]:
    """The variables of every StackPage query the page sent (the filters the server applied)."""
    found = []
    for request in requests:
        if request.method != "POST" or not request.url.endswith("/graphql") or not request.post_data:
            continue
        body = json.loads(request.post_data)
        if body.get("operationName") == "StackPage" or "query StackPage" in body.get("query", ""):
            found.append(body["variables"])
    return found


def shown_seconds(text: str) -> float:
    """A duration as format.ts's duration() writes one below a minute ("850 ms", "1.2 s")."""
    number, unit = text.split()
    return float(number) / 1000 if unit == "ms" else float(number)


def run_rows(page: Page) -> list[str]:
    return page.locator("tr[data-run-id]").evaluate_all("rows => rows.map(r => r.dataset.runId)")


def test_the_history_filters_by_status_type_and_trigger_on_the_server_and_pages(
    queue: Queue, ui: UI, tenant: Tenant, api: Api
) -> None:
    assert api.post(f"/runs/{queue.first}/cancel").status_code == 200
    assert api.post(f"/runs/{queue.holder}/discard").status_code == 200
    took_ms = api.run(queue.holder)["duration_ms"]
    extra = [api.start("web", "plan") for _ in range(EXTRA_PLANS)]

    page = ui.open()
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/stacks/web")
    history = page.get_by_role("group", name="Filter the run history")
    expect(page.locator("tr[data-run-id]")).to_have_count(25)

    # Status: the canceled run alone, counted by the server. It never started: no duration.
    history.get_by_label("Filter runs by status").select_option(label="canceled")
    expect(page.locator(f'tr[data-run-id="{queue.first}"]')).to_be_visible()
    expect(page.get_by_test_id("history-matches")).to_have_text("1 run matches")
    expect(page.locator("tr[data-run-id]")).to_have_count(1)
    assert run_rows(page) == [queue.first]
    expect(page.locator(f'tr[data-run-id="{queue.first}"] td[data-label="Took"]')).to_have_text("—")
    assert stack_page_variables(requests)[-1]["status"] == ["CANCELED"]
    expect(page).to_have_url(re.compile(r"\?status=canceled$"))

    # TOOK runs from the first phase's start to the end: the discarded plan shows the server's
    # durationMs, which the queue time before its checkout is not part of.
    history.get_by_label("Filter runs by status").select_option(label="discarded")
    expect(page.locator(f'tr[data-run-id="{queue.holder}"]')).to_be_visible()
    expect(page.locator("tr[data-run-id]")).to_have_count(1)
    assert run_rows(page) == [queue.holder]
    assert took_ms is not None and took_ms >= 0
    took = page.locator(f'tr[data-run-id="{queue.holder}"] td[data-label="Took"]')
    expect(took).to_have_text(re.compile(r"^\d+(\.\d)? m?s$"))
    assert shown_seconds(took.inner_text()) == pytest.approx(took_ms / 1000, abs=0.051)

    # Type and trigger, each on its own and together.
    history.get_by_label("Filter runs by status").select_option(label="Any status")
    history.get_by_label("Filter runs by type").select_option(label="drift")
    expect(page.locator(f'tr[data-run-id="{queue.scheduled}"]')).to_be_visible()
    expect(page.get_by_test_id("history-matches")).to_have_text("1 run matches")
    assert run_rows(page) == [queue.scheduled]
    history.get_by_label("Filter runs by type").select_option(label="Any type")
    history.get_by_label("Filter runs by trigger").select_option(label="Started by a push")
    expect(page.locator(f'tr[data-run-id="{queue.pushed}"]')).to_be_visible()
    expect(page.get_by_test_id("history-matches")).to_have_text("1 run matches")
    assert run_rows(page) == [queue.pushed]
    expect(page.locator(f'tr[data-run-id="{queue.pushed}"]')).to_contain_text("git:grace@example.com")
    assert stack_page_variables(requests)[-1]["trigger"] == ["PUSH"]
    history.get_by_label("Filter runs by type").select_option(label="apply")
    expect(page.get_by_text("No run matches these filters.")).to_be_visible()
    ui.check_screen(page, "desktop-history-filtered")

    # Plans by a person: 26 of them (the canceled one and the extra ones), paged by 25.
    history.get_by_label("Filter runs by type").select_option(label="plan")
    history.get_by_label("Filter runs by trigger").select_option(label="Started by a person")
    expect(page.get_by_test_id("history-matches")).to_have_text(f"{EXTRA_PLANS + 1} runs match")
    expect(page.locator("tr[data-run-id]")).to_have_count(25)
    assert run_rows(page)[0] == extra[-1]
    page.get_by_role("button", name="Older runs →").click()
    expect(page.locator("tr[data-run-id]")).to_have_count(1)
    assert run_rows(page) == [queue.first]
    assert stack_page_variables(requests)[-1]["after"] is not None
    # A filtered address opens filtered (and a phone shows the same cards).
    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, f"/orgs/{tenant.org}/stacks/web?status=canceled")
    expect(phone.locator("tr[data-run-id]")).to_have_count(1)
    expect(phone.get_by_label("Filter runs by status")).to_have_value("CANCELED")
    # The header's active runs: the two queued by triggers and the extra plans.
    expect(phone.get_by_test_id("active-runs-button")).to_have_accessible_name(
        f"Active runs: {EXTRA_PLANS + 2} runs"
    )
    ui.check_screen(phone, "phone-history-filtered")
