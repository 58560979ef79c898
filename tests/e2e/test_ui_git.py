"""Browser: Git-driven runs. The stack page shows and edits what a push starts, a run shows the
push that started it (commit and delivery), and the organization's Git deliveries page lists
deliveries (accepted and refused) and creates the webhook secret, shown once; at a laptop's size
and a phone's. Pinned to SQLite, as the other browser tests."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from conftest import LiveServer, Tenant
from support.e2e import Api
from support.git_http import GitHttpServer
from support.git_repos import commit_files, make_bare, make_repo, push
from support.waiting import wait_until

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

TOKEN = "ghp_ui_token_3b1d"
MAIN_TF = 'resource "terraform_data" "a" {}\n'


@pytest.fixture
def origin(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    server = GitHttpServer(tmp_path / "srv", token=TOKEN)
    with server.running():
        make_bare(tmp_path / "srv" / "infra")
        work = tmp_path / "work"
        make_repo(work, {"infra/main.tf": MAIN_TF})
        url = server.url("infra")
        push(work, url, token=TOKEN)
        yield work, url


def deliver(api: Api, secret: str, body: bytes, delivery: str) -> dict[str, object]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": f"sha256={digest}",
    }
    response = api.http.post(f"{api.o}/git/webhook", content=body, headers=headers)
    return {"status": response.status_code, **response.json()}


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_trigger_run_origin_and_git_deliveries_pages(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, origin: tuple[Path, str], size: str
) -> None:
    work, url = origin
    body = {"slug": "net", "repository": url, "path": "infra", "trigger": "plan", "git_https_token": TOKEN}
    assert api.http.post(f"{api.o}/stacks", content=json.dumps(body)).status_code == 201
    secret = api.http.post(f"{api.o}/git/webhook-secret").json()["secret"]
    before = str(commit_files(work, {}, "noop"))
    head = commit_files(
        work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change", author=("Grace", "grace@example.com")
    )
    push(work, url, token=TOKEN)
    payload = json.dumps(
        {"ref": "refs/heads/main", "before": before, "after": head, "repository": {"clone_url": url + ".git"}}
    ).encode()
    assert deliver(api, "not-the-secret", payload, "delivery-refused")["status"] == 401
    answer = deliver(api, secret, payload, "delivery-7")
    [run_id] = answer["runs"]  # type: ignore[misc]

    page = ui.open(ui.sizes[size])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    expect(page.get_by_test_id("run-trigger")).to_contain_text(
        f"by a push of {head[:7]} (delivery delivery-7)"
    )
    expect(page.get_by_text("git:grace@example.com")).to_be_visible()

    page.goto(f"/orgs/{tenant.org}/stacks/net")
    picker = page.get_by_label("On a push")
    expect(picker).to_have_value("PLAN")
    ui.check_screen(page, f"{size}-stack-trigger")
    if size == "desktop":
        picker.select_option("APPLY")
        assert api.http.get(f"{api.o}/stacks/net").json()["trigger"] == "plan"  # not on the pick
        page.get_by_role("button", name="Save", exact=True).click()
        confirm = page.get_by_test_id("confirm-change")
        expect(confirm).to_contain_text("a commit on main that touches this stack starts: apply")
        ui.check_screen(page, f"{size}-stack-trigger-confirm")
        confirm.get_by_role("button", name="Save").click()
        expect(page.get_by_test_id("saved")).to_have_text("✓ Saved")
        wait_until(
            lambda: api.http.get(f"{api.o}/stacks/net").json()["trigger"] == "apply",
            10,
            "the trigger to be saved",
        )
        page.reload()
        expect(page.get_by_label("On a push")).to_have_value("APPLY")

    page.goto(f"/orgs/{tenant.org}/git")
    expect(page).to_have_title(f"Git deliveries · {tenant.org} · Firstlume")
    rows = page.get_by_test_id("deliveries").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("1 run started")
    expect(rows.nth(0)).to_contain_text("delivery-7")
    expect(rows.nth(1)).to_contain_text("refused")
    expect(page.get_by_test_id("webhook-url")).to_have_text(
        f"{server.url}/api/v1/orgs/{tenant.org}/git/webhook"
    )
    assert secret not in page.content()
    ui.check_screen(page, f"{size}-git-deliveries")

    page.get_by_role("button", name="Rotate the secret").click()
    shown = page.get_by_test_id("new-secret").locator("code")
    expect(shown).to_be_visible()
    rotated = shown.inner_text()
    assert rotated != secret
    assert deliver(api, rotated, payload, "delivery-8")["status"] == 200
    assert deliver(api, secret, payload, "delivery-9")["status"] == 401
    # The list follows the log live (gitDeliveries subscription): no reload needed.
    expect(rows).to_have_count(4, timeout=20_000)
    expect(rows.nth(0)).to_contain_text("refused")
    expect(rows.nth(1)).to_contain_text("was seen already")
    page.reload()
    expect(page.get_by_test_id("new-secret")).to_have_count(0)
    assert rotated not in page.content()
