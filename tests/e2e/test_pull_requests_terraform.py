"""A pull request's proposed run, end to end: served control plane with its scheduler and local
executors, real Terraform with managed state, a smart-HTTP Git server holding the PR head at
refs/pull/<n>/head, and a GitHub pull_request webhook. The proposed run plans while a tracked
apply is applying (holding the stack's lock and Terraform's state lock), and leaves the state as
it was. SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from conftest import LiveServer, Tenant
from support.e2e import Api
from support.git_http import GitHttpServer
from support.git_repos import commit_files, make_bare, make_repo, push
from support.pull_requests import github_pull_request, push_pull_request_head
from support.terraform import requires_terraform
from support.waiting import wait_until
from test_git_webhooks import signed

pytestmark = requires_terraform

TOKEN = "ghp_pr_e2e_token_7d21"
CODE = """
variable "size" {
  type    = string
  default = "small"
}
resource "terraform_data" "app" { input = var.size }
"""


def hold_until(release: Path) -> str:
    """A resource whose creation waits for `release` to exist: the apply stays in progress."""
    return (
        'resource "terraform_data" "hold" {\n  provisioner "local-exec" {\n'
        f'    command = "while [ ! -f {release.as_posix()} ]; do sleep 0.1; done"\n  }}\n}}\n'
    )


def state(api: Api) -> dict[str, Any]:
    response = api.http.get(f"{api.o}/stacks/app/state")
    assert response.status_code == 200, response.text
    return json.loads(response.content)  # type: ignore[no-any-return]


def test_a_proposed_run_plans_while_a_tracked_apply_holds_the_lock_and_leaves_the_state(
    api: Api, server: LiveServer, tenant: Tenant, tmp_path: Path
) -> None:
    git = GitHttpServer(tmp_path / "srv", token=TOKEN)
    release = tmp_path / "release"
    with git.running():
        make_bare(tmp_path / "srv" / "infra")
        work = tmp_path / "work"
        make_repo(work, {"infra/main.tf": CODE, "README.md": "infra\n"})
        url = git.url("infra")
        push(work, url, token=TOKEN)
        secret = api.post("/git/webhook-secret").json()["secret"]
        body = {
            "slug": "app",
            "repository": url,
            "path": "infra",
            "pull_requests": "plan",
            "git_https_token": TOKEN,
        }
        assert api.http.post(f"{api.o}/stacks", content=json.dumps(body)).status_code == 201
        api.settings("", {"require_approval": False})

        first = api.start("app", "apply")
        api.wait(first, "applied")
        before = state(api)

        # The tracked apply: it stays applying (stack lock and Terraform's state lock held).
        commit_files(work, {"infra/hold.tf": hold_until(release)}, "Hold the apply")
        push(work, url, token=TOKEN)
        tracked = api.start("app", "apply")
        api.wait(tracked, "applying")
        lock = wait_until(
            lambda: api.http.get(f"{api.o}/stacks/app/state/lock").json()["lock"],
            60,
            "the apply's state lock",
        )
        try:
            head = commit_files(
                work, {"infra/main.tf": CODE.replace('"small"', '"large"')}, "Grow", branch="feature"
            )
            push_pull_request_head(work, url, "github", 5, "feature", TOKEN)
            payload = json.dumps(github_pull_request(url, 5, "opened", head)).encode()
            response = httpx.post(
                f"{api.o}/git/webhook",
                content=payload,
                headers=signed("github", secret, payload, "pr-5-opened", event="pull_request"),
                timeout=30,
            )
            assert response.status_code == 200, response.text
            [proposed] = response.json()["runs"]

            run = api.wait(proposed, "planned", timeout=120)

            assert run["proposed"] is True and run["trigger"]["kind"] == "pull_request"
            assert run["commit"]["sha"] == head
            assert (
                run["summary"]["update"] == 1
                or run["summary"]["replace"] == 1
                or run["summary"]["create"] >= 1
            )
            assert api.run(tracked)["status"] == "applying"  # still holding everything
            assert api.http.get(f"{api.o}/stacks/app/state/lock").json()["lock"] == lock
            assert state(api)["serial"] == before["serial"]
            assert "Error acquiring the state lock" not in api.log(proposed)
            refused = api.post(f"/runs/{proposed}/approve", {"acknowledged": []})
            assert refused.status_code == 409 and refused.json()["error"]["code"] == "proposed_run"
        finally:
            release.touch()
        api.wait(tracked, "applied", timeout=120)
    # The proposed run wrote nothing: only the tracked applies moved the state.
    versions = api.http.get(f"{api.o}/stacks/app/state/versions").json()["versions"]
    assert {v["run"]["id"] for v in versions} == {first, tracked}
