"""Feedback to the Git host of a pull request: a commit status per stack and one comment per PR
(created once, then edited), through the outbox with retries, recorded in the delivery log.
The host's REST API is a stand-in following each host's documented endpoints
(support/git_host_api.py); Git, the database (SQLite and PostgreSQL) and the services are real."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from conftest import Tenant, settings_env
from firstlume.db.models_git import PullRequest
from firstlume.services.context import Context
from firstlume.services.git.feedback import comment_text
from firstlume.settings import Settings
from support.git_host_api import GitHostApi
from support.git_http import GitHttpServer
from support.runs import plan_run
from support.waiting import until
from test_git_webhooks import MAIN_TF
from test_pull_requests import PullRequests

HOST_TOKEN = "ghp_host_api_token_93b1"
SECRET_VALUE = "hunter2-sensitive-0x5eed"


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    # Retries come fast: the backoff's first wait is 50 ms (FIRSTLUME_NOTIFICATION_FIRST_RETRY).
    env = settings_env(
        database_url,
        tmp_path / "data",
        FIRSTLUME_SCHEDULER="off",
        FIRSTLUME_NOTIFICATION_FIRST_RETRY="0.05",
    )
    return Settings.from_env(env)


@pytest.fixture
def git_server(tmp_path: Path) -> Iterator[GitHttpServer]:
    from test_git_webhooks import TOKEN

    server = GitHttpServer(tmp_path / "srv", token=TOKEN)
    with server.running():
        yield server


@pytest.fixture
async def prs(
    client: httpx.AsyncClient, tenant: Tenant, git_server: GitHttpServer, tmp_path: Path
) -> PullRequests:
    return PullRequests(client, tenant, git_server, tmp_path)


def host_name(prs: PullRequests) -> str:
    return prs.url.split("://")[1].split("/")[0]


async def configure(prs: PullRequests, kind: str, api_url: str) -> None:
    response = await prs.client.put(
        f"{prs.o}/git/hosts/{host_name(prs)}",
        json={"kind": kind, "api_url": api_url, "token": HOST_TOKEN},
        headers=prs.tenant.headers,
    )
    assert response.status_code == 200, response.text


def plan_deleting(addresses: list[str], replaced: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    """A plan as `terraform show -json` prints it: each address deleted (or replaced), its
    input sensitive."""

    def change(address: str, actions: list[str]) -> dict[str, Any]:
        kind, name = address.split(".", 1)
        return {
            "address": address,
            "mode": "managed",
            "type": kind,
            "name": name.split("[")[0],
            "provider_name": "terraform.io/builtin/terraform",
            "change": {
                "actions": actions,
                "before": {
                    "id": "x",
                    "input": SECRET_VALUE,
                    "output": SECRET_VALUE,
                    "triggers_replace": None,
                },
                "after": None if actions == ["delete"] else {"input": SECRET_VALUE, "triggers_replace": None},
                "after_unknown": {} if actions == ["delete"] else {"id": True, "output": True},
                "before_sensitive": {"input": True, "output": True},
                "after_sensitive": False if actions == ["delete"] else {"input": True},
            },
            **({"action_reason": "replace_because_cannot_update"} if actions != ["delete"] else {}),
        }

    return {
        "format_version": "1.2",
        "terraform_version": "1.11.0",
        "resource_changes": [change(a, ["delete"]) for a in addresses]
        + [change(a, ["delete", "create"]) for a in replaced],
    }


KINDS = {"github": "github", "gitea": "gitea", "gitlab": "gitlab"}


def status_calls(host: GitHostApi, state: str | None = None) -> list[Any]:
    calls = [c for c in host.of("POST", r"/statuses/[0-9a-f]{40}$") if c.status == 201]
    if state is None:
        return calls
    wanted = {"failure": "failed", "error": "canceled"}.get(state, state) if host.kind == "gitlab" else state
    return [c for c in calls if c.body["state"] == wanted]


def comment_creations(host: GitHostApi) -> list[Any]:
    return [c for c in host.of("POST", r"/(comments|notes)$") if c.status == 201]


def comment_edits(host: GitHostApi) -> list[Any]:
    return [c for c in host.calls if c.method in ("PATCH", "PUT") and c.status == 200]


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_a_pr_gets_pending_then_success_and_one_comment_edited_for_each_new_head(
    prs: PullRequests, ctx: Context, kind: str
) -> None:
    dialect = kind
    await prs.setup()
    with GitHostApi(kind, HOST_TOKEN).running() as host:
        await configure(prs, kind, host.api_url)
        first = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, dialect)
        await prs.deliver(dialect, "open", first)

        [pending] = await until(lambda: status_calls(host, "pending"), 10, "the pending status")
        await until(lambda: comment_creations(host), 10, "the comment")
        assert pending.path.endswith(f"/statuses/{first}")
        context_key = "name" if kind == "gitlab" else "context"
        assert pending.body[context_key] == "firstlume/net"
        assert re.match(r"http://.*/orgs/acme/runs/\w+$", pending.body["target_url"])

        await plan_run(ctx, plan_deleting(["terraform_data.old"], ["terraform_data.swap"]))

        [success] = await until(lambda: status_calls(host, "success"), 10, "the success status")
        assert success.body["description"] == "1 to add, 0 to change, 2 to destroy"
        await until(lambda: comment_edits(host), 10, "the comment's edit")
        [comment_id] = host.comments
        assert "`net`" in host.comments[comment_id]
        assert (
            "terraform_data.old" in host.comments[comment_id]
            and "terraform_data.swap" in host.comments[comment_id]
        )

        second = prs.commit({"infra/main.tf": MAIN_TF + "# v3\n"}, dialect)
        await prs.deliver(dialect, "push", second)

        await until(
            lambda: [c for c in status_calls(host, "pending") if c.path.endswith(second)],
            10,
            "the new pending",
        )
        await until(
            lambda: second[:7] in host.comments[comment_id], 10, "the comment edited for the new head"
        )
        # A third head while the second's run is still queued: that run is superseded, the new one planned.
        third = prs.commit({"infra/main.tf": MAIN_TF + "# v4\n"}, dialect)
        await prs.deliver(dialect, "push", third)
        _, superseded, latest = await prs.runs()
        assert (superseded["status"], superseded["error"]) == ("canceled", f"superseded by {third[:7]}")
        assert await plan_run(ctx, plan_deleting(["terraform_data.old"])) == {latest["id"]: "planned"}

        await until(
            lambda: [c for c in status_calls(host, "error") if c.path.endswith(second)],
            10,
            "the superseded status",
        )
        [done] = await until(
            lambda: [c for c in status_calls(host, "success") if c.path.endswith(third)],
            10,
            "the third's success",
        )
        assert done.body["description"] == "0 to add, 0 to change, 1 to destroy"
        await until(
            lambda: third[:7] in host.comments[comment_id], 10, "the comment edited for the third head"
        )
        assert "planned" in host.comments[comment_id]
        assert len(comment_creations(host)) == 1  # the same comment, edited in place
        assert all(c.headers.get("user-agent", "").startswith("Firstlume") for c in host.calls)


async def test_a_pr_touching_nothing_gets_no_status(prs: PullRequests) -> None:
    await prs.setup()
    with GitHostApi("github", HOST_TOKEN).running() as host:
        await configure(prs, "github", host.api_url)
        head = prs.commit({"docs/README.md": "more\n"}, "github")

        await prs.deliver("github", "open", head)
        # Something that does get sent, after: a PR that does touch the stack.
        other = prs.commit({"infra/main.tf": MAIN_TF + "# x\n"}, "github", number=8)
        await prs.deliver("github", "open", other, number=8)
        await until(lambda: status_calls(host), 10, "the other PR's status")

        assert [c.path for c in status_calls(host)] == [f"/repos/infra/statuses/{other}"]


async def test_the_host_failing_twice_then_answering_gets_each_message_once_with_the_retries_logged(
    prs: PullRequests,
) -> None:
    await prs.setup()
    with GitHostApi("github", HOST_TOKEN).running() as host:
        await configure(prs, "github", host.api_url)
        host.fail(2, 500)
        head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")

        await prs.deliver("github", "open", head)

        await until(lambda: status_calls(host) and comment_creations(host), 15, "the status and the comment")
        assert len(status_calls(host)) == 1 and len(comment_creations(host)) == 1
        assert [c.status for c in host.calls][:3] == [500, 500, 201]

        async def delivered() -> list[dict[str, Any]]:
            response = await prs.client.get(f"{prs.o}/git/deliveries", headers=prs.tenant.headers)
            feedback = response.json()["feedback"]
            return feedback if all(f["delivered_at"] for f in feedback) else []

        feedback = await until(delivered, 10, "the log to show both delivered")
        status = next(f for f in feedback if f["kind"] == "status")
        assert [a["status_code"] for a in status["answers"]] == [500, 500, 201]
        assert status["attempts"] == 3 and status["status"]["state"] == "pending"
        assert HOST_TOKEN not in response_text(feedback)


def response_text(value: Any) -> str:
    import json

    return json.dumps(value)


async def test_the_host_down_for_the_whole_run_leaves_the_run_unaffected(
    prs: PullRequests, ctx: Context
) -> None:
    await prs.setup()
    with GitHostApi("github", HOST_TOKEN).running() as gone:
        api_url = gone.api_url  # a port nothing listens on once this block ends
    await configure(prs, "github", api_url)
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
    [run_id] = (await prs.deliver("github", "open", head)).json()["runs"]

    assert await plan_run(ctx, plan_deleting(["terraform_data.old"])) == {run_id: "planned"}

    async def failed_attempts() -> list[dict[str, Any]]:
        response = await prs.client.get(f"{prs.o}/git/deliveries", headers=prs.tenant.headers)
        return [f for f in response.json()["feedback"] if f["attempts"] >= 2]

    [retried, *_] = await until(failed_attempts, 10, "retries against the host that is down")
    assert retried["delivered_at"] is None and retried["next_attempt_at"] is not None
    assert retried["answers"][0]["status_code"] is None and retried["answers"][0]["error"]
    run = (await prs.client.get(f"{prs.o}/runs/{run_id}", headers=prs.tenant.headers)).json()
    assert run["status"] == "planned" and run["error"] is None


async def test_the_comment_for_a_2000_resource_plan_stays_short_and_names_no_sensitive_value(
    prs: PullRequests, ctx: Context
) -> None:
    await prs.setup()
    with GitHostApi("github", HOST_TOKEN).running() as host:
        await configure(prs, "github", host.api_url)
        head = prs.commit({"infra/main.tf": MAIN_TF + "# big\n"}, "github")
        await prs.deliver("github", "open", head)
        deleted = [f'terraform_data.item["{"k" * 120}-{i:04}"]' for i in range(1500)]
        replaced = [f"terraform_data.swap[{i}]" for i in range(500)]

        await plan_run(ctx, plan_deleting(deleted, replaced))

        async with ctx.db.read() as session:
            pull_id = await session.scalar(select(PullRequest.id))
        assert pull_id is not None
        text = await comment_text(ctx, pull_id)
        assert len(text) <= 60_000
        assert SECRET_VALUE not in text and "hunter2" not in text
        assert "2000 to delete or replace" in text and "- and 1950 more" in text
        assert text.count("\n- delete ") + text.count("\n- replace ") == 50
        sent = await until(
            lambda: [body for body in host.comments.values() if "and 1950 more" in body],
            10,
            "the comment sent",
        )
        assert all(SECRET_VALUE not in body and len(body) <= 60_000 for body in sent)


async def test_git_hosts_keep_the_token_write_only_and_refuse_bad_input(
    prs: PullRequests, ctx: Context
) -> None:
    o, headers = prs.o, prs.tenant.headers
    good = {"kind": "gitlab", "api_url": "https://gitlab.example.com/api/v4", "token": HOST_TOKEN}
    put = await prs.client.put(f"{o}/git/hosts/gitlab.example.com", json=good, headers=headers)
    listed = await prs.client.get(f"{o}/git/hosts", headers=headers)

    assert put.status_code == 200
    assert listed.json()["hosts"] == [
        {
            "host": "gitlab.example.com",
            "kind": "gitlab",
            "api_url": "https://gitlab.example.com/api/v4",
            "token_set": True,
            "updated_at": put.json()["updated_at"],
        }
    ]
    assert HOST_TOKEN not in put.text + listed.text
    for body in (
        {**good, "kind": "bitbucket"},
        {**good, "api_url": "ftp://x"},
        {**good, "api_url": "https://user:pw@gitlab.example.com"},
        {k: v for k, v in good.items() if k != "token"},
    ):
        response = await prs.client.put(f"{o}/git/hosts/gitlab.example.com", json=body, headers=headers)
        assert response.status_code == 422, body
    audit = await prs.client.get(f"{o}/audit", headers=headers)
    assert HOST_TOKEN not in audit.text and "git.host.put" in audit.text


async def test_the_pull_requests_list_shows_each_pr_with_its_runs(prs: PullRequests) -> None:
    await prs.setup()
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
    [run_id] = (await prs.deliver("github", "open", head)).json()["runs"]
    other = prs.commit({"infra/main.tf": MAIN_TF + "# v9\n"}, "github", number=9)
    await prs.deliver("github", "open", other, number=9)
    await prs.deliver("github", "close", other, number=9)

    async def listed(query: str) -> list[dict[str, Any]]:
        response = await prs.client.get(f"{prs.o}/pull-requests{query}", headers=prs.tenant.headers)
        assert response.status_code == 200, response.text
        return response.json()["pull_requests"]  # type: ignore[no-any-return]

    [open_pr] = await listed("?state=open&stack=net")
    assert {k: open_pr[k] for k in ("number", "title", "author", "head_sha", "state", "url")} == {
        "number": 7,
        "title": "Widen the network",
        "author": "grace",
        "head_sha": head,
        "state": "open",
        "url": f"{prs.url}/pull/7",
    }
    assert open_pr["repository"] == f"{prs.url}.git"
    assert [(r["id"], r["stack"], r["status"], r["proposed"]) for r in open_pr["runs"]] == [
        (run_id, "net", "queued", True)
    ]
    [closed] = await listed("?state=closed")
    assert closed["number"] == 9 and closed["runs"][0]["status"] == "canceled"
    assert len(await listed("")) == 2
    assert await listed("?stack=nothing") == []
    bad = await prs.client.get(f"{prs.o}/pull-requests?state=merged-ish", headers=prs.tenant.headers)
    assert bad.status_code == 422


async def test_a_fork_pr_with_the_default_setting_gets_a_status_saying_why(prs: PullRequests) -> None:
    await prs.setup()
    with GitHostApi("github", HOST_TOKEN).running() as host:
        await configure(prs, "github", host.api_url)
        head = prs.commit({"infra/main.tf": MAIN_TF + "# fork\n"}, "github")

        response = await prs.deliver("github", "open", head, fork=True)

        assert response.json()["runs"] == []
        [status] = await until(lambda: status_calls(host), 10, "the status")
        assert status.path.endswith(f"/statuses/{head}") and status.body["state"] == "error"
        assert status.body["context"] == "firstlume/net" and "forks" in status.body["description"]
        assert comment_creations(host) == []
