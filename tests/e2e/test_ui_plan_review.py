"""Browser: reviewing plans the executor uploads. A nested object change shows exactly the keys that change; a sensitive value that
changed reads "sensitive value changed" (the server compares the two values' digests), an
unchanged one folds away with the other unchanged keys, and no sensitive value reaches the browser:
every GraphQL response and subscription frame the page received is searched for them.

The plan is uploaded by a scripted executor (the scheduler is off), as `terraform show -json`
would have it, with the values Terraform marks sensitive. Pinned to SQLite like the other browser
tests.

Also: a plan of 10,000 changes is read from the server a page per group at a time (Run.changes
with action, filters and cursors), never whole."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from playwright.sync_api import Response, WebSocket, expect

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.e2e import Api
from support.executor_api import ExecutorReports

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

SECRETS = ["hunter2-old-pw", "hunter2-new-pw", "kept-api-key-123", "tok-before-9", "tok-after-9"]

PLAN_JSON: dict[str, Any] = {
    "format_version": "1.2",
    "resource_changes": [
        {
            "address": "x_db.main",
            "mode": "managed",
            "type": "x_db",
            "name": "main",
            "change": {
                "actions": ["update"],
                "before": {
                    "settings": {
                        "name": "db",
                        "size": 1,
                        "password": "hunter2-old-pw",
                        "api_key": "kept-api-key-123",
                    },
                    "token": "tok-before-9",
                    "region": "eu",
                },
                "after": {
                    "settings": {
                        "name": "db",
                        "size": 2,
                        "password": "hunter2-new-pw",
                        "api_key": "kept-api-key-123",
                    },
                    "token": "tok-after-9",
                    "region": "eu",
                },
                "after_unknown": {},
                "before_sensitive": {"settings": {"password": True, "api_key": True}, "token": True},
                "after_sensitive": {"settings": {"password": True, "api_key": True}, "token": True},
            },
        }
    ],
}


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    env = settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off")
    served = start_live_server(env, tmp_path / "server.log")
    yield served
    stop_live_server(served)


async def upload_plan(ctx: Context, server: LiveServer, plan_json: dict[str, Any]) -> None:
    [launch] = await dispatch.claim_plans(ctx)
    executor = ExecutorReports.served(server.url, launch.token)
    try:
        await executor.step("plan", "running")
        await executor.plan(plan_json)
        await executor.step("plan", "done")
        assert await executor.finish() == "planned"
    finally:
        await executor.close()


def planned_run(server: LiveServer, api: Api, ctx: Context, slug: str, plan_json: dict[str, Any]) -> str:
    """A plan run of a new stack `slug`, planned with `plan_json`. Written before the browser
    starts: Playwright's sync API and asyncio.run cannot share a thread."""
    created = api.http.post(
        f"{api.o}/stacks", content=json.dumps({"slug": slug, "repository": "file:///repo"})
    )
    assert created.status_code == 201, created.text
    run_id = api.start(slug, "plan")
    asyncio.run(upload_plan(ctx, server, plan_json))
    return run_id


@pytest.fixture
def planned(server: LiveServer, api: Api, ctx: Context) -> str:
    return planned_run(server, api, ctx, "db", PLAN_JSON)


def test_a_changed_secret_says_so_and_no_sensitive_value_reaches_the_browser(
    planned: str, ui: UI, tenant: Tenant
) -> None:
    received: list[str] = []
    responses: list[Response] = []

    def on_socket(socket: WebSocket) -> None:
        socket.on("framereceived", lambda payload: received.append(str(payload)))

    for size in ("desktop", "phone"):
        page = ui.open(ui.sizes[size])
        page.on(
            "response", lambda response: responses.append(response) if "/graphql" in response.url else None
        )
        page.on("websocket", on_socket)
        ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{planned}")
        change = page.locator('[data-address="x_db.main"]')
        settings = change.locator('tr[data-attribute="settings"]')
        expect(settings.locator('[data-diff-path="settings.password"]')).to_be_visible()
        # Exactly the keys that change: the size, and the password (its digest changed). The name
        # and the unchanged secret fold away.
        kinds = dict(
            settings.locator("li[data-diff-path]").evaluate_all(
                "rows => rows.map(r => [r.dataset.diffPath, r.dataset.diffKind])"
            )
        )
        assert kinds == {"settings.password": "changed", "settings.size": "changed"}
        expect(settings.locator('[data-diff-path="settings.size"]')).to_contain_text("size = 1 → 2")
        expect(settings.locator('[data-diff-path="settings.password"]')).to_have_text(
            "~changed: password = sensitive value changed"
        )
        expect(change.locator('tr[data-attribute="token"]')).to_contain_text("sensitive value changed")
        expect(change.locator('tr[data-attribute="region"]')).to_have_count(0)
        # The folded keys can be shown: the unchanged secret is still only "(sensitive)".
        settings.get_by_role("button", name="Show 2 unchanged keys").click()
        expect(settings.locator('[data-diff-path="settings.api_key"]')).to_have_attribute(
            "data-diff-kind", "same"
        )
        expect(settings.locator('[data-diff-path="settings.api_key"]')).to_contain_text("(sensitive)")
        ui.check_screen(page, f"{size}-diff-sensitive")
        page_text = page.content()
        assert not [s for s in SECRETS if s in page_text]

    bodies = [response.text() for response in responses] + received
    assert any("(sensitive value changed)" in body for body in bodies), "no change data was captured"
    leaked = [s for s in SECRETS if any(s in body for body in bodies)]
    assert leaked == [], f"sensitive values in GraphQL responses: {leaked}"


def big_plan(deletions: int, creations: int) -> dict[str, Any]:
    def change(name: str, action: str) -> dict[str, Any]:
        gone = action == "delete"
        return {
            "address": f"x_node.{name}",
            "mode": "managed",
            "type": "x_node",
            "name": name,
            "change": {
                "actions": [action],
                "before": {"input": name} if gone else None,
                "after": None if gone else {"input": name},
                "after_unknown": {},
                "before_sensitive": {} if gone else False,
                "after_sensitive": False if gone else {},
            },
        }

    return {
        "format_version": "1.2",
        "resource_changes": [change(f"old{n:05d}", "delete") for n in range(deletions)]
        + [change(f"new{n:05d}", "create") for n in range(creations)],
    }


@pytest.fixture
def big(server: LiveServer, api: Api, ctx: Context) -> str:
    return planned_run(server, api, ctx, "big", big_plan(400, 9_600))


def test_a_plan_of_10000_changes_is_read_a_page_at_a_time_from_the_server(
    big: str, ui: UI, tenant: Tenant
) -> None:
    page = ui.open()
    responses: list[Response] = []
    page.on("response", lambda response: responses.append(response) if "/graphql" in response.url else None)
    # Signing in on the run's address: no navigation away, so every response can be read after.
    started = time.monotonic()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{big}")
    expect(page.get_by_test_id("summary")).to_have_text("400 delete · 9,600 create")
    created = page.locator('section[data-group="CREATE"]')
    deleted = page.locator('section[data-group="DELETE"]')
    expect(created.get_by_test_id("group-count")).to_have_text("9,600")
    expect(created.locator("[data-address]")).to_have_count(50)
    expect(deleted.locator("[data-address]")).to_have_count(50)
    shown = time.monotonic() - started
    print(f"\nchanges: first page of each group of a 10,000-change plan shown in {shown * 1000:.0f} ms")
    expect(created.locator(".pager")).to_contain_text("1–50 of 9,600")
    created.get_by_role("button", name="Next →").click()
    expect(created.locator("[data-address]").first).to_have_attribute("data-address", "x_node.new00050")
    expect(created.locator(".pager")).to_contain_text("51–100 of 9,600")
    created.get_by_role("button", name="← Previous").click()
    expect(created.locator("[data-address]").first).to_have_attribute("data-address", "x_node.new00000")

    # Filtering happens on the server: the counts and the page are the server's.
    page.get_by_label("Filter changes by text").fill("new0950")
    expect(created.locator("[data-address]")).to_have_count(10)
    expect(created).to_contain_text("(10 shown)")
    expect(deleted.locator("[data-address]")).to_have_count(0)
    ui.check_screen(page, "desktop-changes-10000")
    # No response carried the whole plan: each is a page (the largest well under a megabyte).
    sizes = [len(response.body()) for response in responses]
    assert sizes and max(sizes) < 1_000_000, sizes
    assert shown < 15, f"the run page took {shown:.1f}s to show a 10,000-change plan"

    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, f"/orgs/{tenant.org}/runs/{big}")
    expect(phone.locator('section[data-group="CREATE"] [data-address]')).to_have_count(50)
    ui.check_screen(phone, "phone-changes-10000")
