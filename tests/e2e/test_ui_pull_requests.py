"""Browser: pull requests. A proposed run says so, links its pull request and shows no approval
panel; the stack's Pull requests tab lists the pull request with its proposed run. Served control
plane with real executors and Terraform, a smart-HTTP Git server and a GitHub pull_request
webhook; at a laptop's size and a phone's. Pinned to SQLite, as the other browser tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from conftest import LiveServer, Tenant
from support.e2e import Api
from support.git_http import GitHttpServer
from support.git_repos import commit_files, make_bare, make_repo, push
from support.pull_requests import github_pull_request, push_pull_request_head
from test_git_webhooks import signed

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

TOKEN = "ghp_ui_pr_token_5e0a"
MAIN_TF = 'resource "terraform_data" "a" {}\n'


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_a_proposed_run_and_the_stacks_pull_requests_tab(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, tmp_path: Path, size: str
) -> None:
    git = GitHttpServer(tmp_path / "srv", token=TOKEN)
    with git.running():
        make_bare(tmp_path / "srv" / "infra")
        work = tmp_path / "work"
        make_repo(work, {"infra/main.tf": MAIN_TF})
        url = git.url("infra")
        push(work, url, token=TOKEN)
        body = {
            "slug": "net",
            "repository": url,
            "path": "infra",
            "pull_requests": "plan",
            "git_https_token": TOKEN,
        }
        assert api.http.post(f"{api.o}/stacks", content=json.dumps(body)).status_code == 201
        secret = api.post("/git/webhook-secret").json()["secret"]
        head = commit_files(work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change", branch="feature")
        push_pull_request_head(work, url, "github", 7, "feature", TOKEN)
        payload = json.dumps(github_pull_request(url, 7, "opened", head)).encode()
        response = api.http.post(
            f"{api.o}/git/webhook",
            content=payload,
            headers=signed("github", secret, payload, "pr-7", event="pull_request"),
        )
        [run_id] = response.json()["runs"]
        api.wait(run_id, "planned", "no_changes", timeout=120)

    page = ui.open(ui.sizes[size])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    expect(page.get_by_test_id("proposed-run")).to_contain_text("Proposed run.")
    trigger = page.get_by_test_id("run-trigger")
    expect(trigger).to_contain_text(f"for pull request #7 Widen the network at {head[:7]}")
    expect(trigger.get_by_role("link")).to_have_attribute("href", f"{url}/pull/7")
    expect(page.get_by_test_id("approval")).to_have_count(0)
    ui.check_screen(page, f"{size}-proposed-run")

    page.goto(f"/orgs/{tenant.org}/stacks/net/pull-requests")
    expect(page).to_have_title("Pull requests · net · Stacks · Firstlume")
    rows = page.get_by_test_id("pull-requests").locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.nth(0)).to_contain_text("#7 Widen the network")
    expect(rows.nth(0)).to_contain_text(head[:7])
    ui.check_screen(page, f"{size}-stack-pull-requests")
    rows.nth(0).get_by_role("link", name="#1").click()
    expect(page).to_have_url(f"{server.url}/orgs/{tenant.org}/runs/{run_id}")
