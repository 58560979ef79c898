"""A plan policy's deny on a pull request's proposed run: the run fails at the end of its plan,
and the commit status on the PR head says "failure" with the policy's message (issue 44; the
policy is evaluated by the real Rego engine in its worker process, hence e2e). The host's REST
API is the suite's stand-in (support/git_host_api.py); Git and the database are real."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_policies_runs import finish_plans

from conftest import Tenant, settings_env
from firstlume.services.context import Context
from firstlume.settings import Settings
from support.git_host_api import GitHostApi
from support.git_http import GitHttpServer
from support.waiting import until
from test_git_webhooks import MAIN_TF
from test_pull_request_feedback import HOST_TOKEN, configure, plan_deleting, status_calls
from test_pull_requests import PullRequests

NO_DELETIONS = """package firstlume.protect

deny contains msg if {
  some rc in input.plan.resource_changes
  "delete" in rc.change.actions
  msg := sprintf("%s would be deleted", [rc.address])
}
"""


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    env = settings_env(
        database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off", FIRSTLUME_NOTIFICATION_FIRST_RETRY="0.05"
    )
    return Settings.from_env(env)


@pytest.fixture
def git_server(tmp_path: Path) -> Iterator[GitHttpServer]:
    from test_git_webhooks import TOKEN

    server = GitHttpServer(tmp_path / "srv", token=TOKEN)
    with server.running():
        yield server


async def test_a_denied_proposed_run_fails_and_its_commit_status_carries_the_deny(
    client: httpx.AsyncClient, tenant: Tenant, git_server: GitHttpServer, tmp_path: Path, ctx: Context
) -> None:
    prs = PullRequests(client, tenant, git_server, tmp_path)
    await prs.setup()
    h = tenant.headers
    created = await client.post(
        f"{prs.o}/policies", headers=h, json={"name": "protect", "kind": "plan", "rego": NO_DELETIONS}
    )
    assert created.status_code == 201, created.text
    assert (
        await client.patch(f"{prs.o}/settings", headers=h, json={"policies": ["protect"]})
    ).status_code == 200

    with GitHostApi("github", HOST_TOKEN).running() as host:
        await configure(prs, "github", host.api_url)
        head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
        await prs.deliver("github", "open", head)
        await until(lambda: status_calls(host, "pending"), 10, "the pending status")

        # Finished through the use case the executor's HTTP route calls, policies included.
        outcome = await finish_plans(ctx, plan_deleting(["terraform_data.db"]))

        assert list(outcome.values()) == ["failed"]
        [run] = await prs.runs()
        assert run["proposed"] is True
        assert run["error"] == "policy protect: terraform_data.db would be deleted"
        assert [c["result"] for c in run["policy_checks"]] == ["deny"]
        [failure] = await until(lambda: status_calls(host, "failure"), 10, "the failure status")
        assert failure.path.endswith(f"/statuses/{head}")
        assert failure.body["context"] == "firstlume/net"
        assert failure.body["description"] == "policy protect: terraform_data.db would be deleted"
        assert not status_calls(host, "success")
