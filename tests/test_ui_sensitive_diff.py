"""Browser: a nested object change shows exactly the keys that change; a sensitive value that
changed reads "sensitive value changed" (the server compares the two values' digests), an
unchanged one folds away with the other unchanged keys, and no sensitive value reaches the browser:
every GraphQL response and subscription frame the page received is searched for them.

The plan is uploaded by a scripted executor (the scheduler is off), as `terraform show -json`
would have it, with the values Terraform marks sensitive. Pinned to SQLite like the other browser
tests."""

from __future__ import annotations

import asyncio
import json
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


async def upload_plan(ctx: Context, server: LiveServer) -> None:
    [launch] = await dispatch.claim_plans(ctx)
    executor = ExecutorReports.served(server.url, launch.token)
    try:
        await executor.step("plan", "running")
        await executor.plan(PLAN_JSON)
        await executor.step("plan", "done")
        assert await executor.finish() == "planned"
    finally:
        await executor.close()


@pytest.fixture
def planned(server: LiveServer, api: Api, ctx: Context) -> str:
    # Written before the browser starts: Playwright's sync API and asyncio.run cannot share a thread.
    created = api.http.post(
        f"{api.o}/stacks", content=json.dumps({"slug": "db", "repository": "file:///repo"})
    )
    assert created.status_code == 201, created.text
    run_id = api.start("db", "plan")
    asyncio.run(upload_plan(ctx, server))
    return run_id


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
