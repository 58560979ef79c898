"""The organization's webhook URL with payloads and headers shaped like each host's published
webhook documentation (GitHub, Gitea, Forgejo, GitLab), against a real smart-HTTP Git server.
Each test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from conftest import Tenant
from firstlume.db.models import Run, RunStatusChange, Stack
from firstlume.db.models_git import GitDelivery
from firstlume.services.context import Context
from support.git_http import GitHttpServer
from support.git_repos import commit_files, make_bare, make_repo, push

TOKEN = "ghp_hook_token_51aa"
MAIN_TF = 'resource "terraform_data" "a" {}\n'
ZERO = "0" * 40


@pytest.fixture
def git_server(tmp_path: Path) -> Iterator[GitHttpServer]:
    server = GitHttpServer(tmp_path / "srv", token=TOKEN)
    with server.running():
        yield server


@pytest.fixture
def origin(tmp_path: Path, git_server: GitHttpServer) -> tuple[Path, str]:
    make_bare(tmp_path / "srv" / "infra")
    work = tmp_path / "work"
    make_repo(work, {"infra/main.tf": MAIN_TF, "docs/README.md": "docs\n"})
    url = git_server.url("infra")
    push(work, url, token=TOKEN)
    return work, url


# -- payloads as the hosts document them (trimmed of fields Firstlume does not read) ----------


def github_payload(url: str, ref: str, before: str, after: str) -> dict[str, Any]:
    """https://docs.github.com/en/webhooks/webhook-events-and-payloads#push"""
    html = url.removesuffix(".git")
    return {
        "ref": ref,
        "before": before,
        "after": after,
        "base_ref": None,
        "created": before == ZERO,
        "deleted": after == ZERO,
        "forced": False,
        "compare": f"{html}/compare/{before[:12]}...{after[:12]}",
        "commits": [
            {
                "id": after,
                "tree_id": "0" * 40,
                "distinct": True,
                "message": "Change infra",
                "timestamp": "2026-11-30T12:00:00Z",
                "url": f"{html}/commit/{after}",
                "author": {"name": "Grace", "email": "grace@example.com", "username": "grace"},
                "committer": {"name": "Grace", "email": "grace@example.com", "username": "grace"},
                "added": [],
                "removed": [],
                "modified": ["docs/README.md"],  # a hint only: Firstlume diffs itself
            }
        ],
        "head_commit": None,
        "repository": {
            "id": 1296269,
            "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5",
            "name": "infra",
            "full_name": "acme/infra",
            "private": True,
            "owner": {"login": "acme", "id": 1, "type": "Organization"},
            "html_url": html,
            "url": html,
            "git_url": "git://github.invalid/acme/infra.git",
            "ssh_url": "git@github.invalid:acme/infra.git",
            "clone_url": html + ".git",
            "default_branch": "main",
        },
        "pusher": {"name": "grace", "email": "grace@example.com"},
        "sender": {"login": "grace", "id": 2, "type": "User"},
    }


def gitea_payload(url: str, ref: str, before: str, after: str) -> dict[str, Any]:
    """https://docs.gitea.com/usage/webhooks (push event); Forgejo sends the same."""
    return {
        "ref": ref,
        "before": before,
        "after": after,
        "compare_url": f"{url}/compare/{before}...{after}",
        "commits": [
            {
                "id": after,
                "message": "Change infra\n",
                "url": f"{url}/commit/{after}",
                "author": {"name": "Grace", "email": "grace@example.com", "username": "grace"},
                "committer": {"name": "Grace", "email": "grace@example.com", "username": "grace"},
                "verification": None,
                "timestamp": "2026-11-30T12:00:00Z",
                "added": [],
                "removed": [],
                "modified": ["infra/main.tf"],
            }
        ],
        "total_commits": 1,
        "head_commit": None,
        "repository": {
            "id": 1,
            "owner": {"id": 1, "login": "acme", "full_name": "", "email": "acme@noreply.invalid"},
            "name": "infra",
            "full_name": "acme/infra",
            "private": True,
            "fork": False,
            "html_url": url,
            "ssh_url": "git@gitea.invalid:acme/infra.git",
            "clone_url": url + ".git",
            "default_branch": "main",
        },
        "pusher": {"id": 2, "login": "grace", "email": "grace@example.com"},
        "sender": {"id": 2, "login": "grace", "email": "grace@example.com"},
    }


def gitlab_payload(url: str, ref: str, before: str, after: str) -> dict[str, Any]:
    """https://docs.gitlab.com/user/project/integrations/webhook_events/#push-events"""
    return {
        "object_kind": "push",
        "event_name": "push",
        "before": before,
        "after": after,
        "ref": ref,
        "ref_protected": True,
        "checkout_sha": after,
        "user_id": 4,
        "user_name": "Grace",
        "user_username": "grace",
        "user_email": "",
        "project_id": 15,
        "project": {
            "id": 15,
            "name": "infra",
            "web_url": url,
            "git_ssh_url": "git@gitlab.invalid:acme/infra.git",
            "git_http_url": url + ".git",
            "namespace": "acme",
            "visibility_level": 0,
            "path_with_namespace": "acme/infra",
            "default_branch": "main",
        },
        "repository": {
            "name": "infra",
            "url": "git@gitlab.invalid:acme/infra.git",
            "homepage": url,
            "git_http_url": url + ".git",
            "git_ssh_url": "git@gitlab.invalid:acme/infra.git",
            "visibility_level": 0,
        },
        "commits": [
            {
                "id": after,
                "message": "Change infra",
                "title": "Change infra",
                "timestamp": "2026-11-30T12:00:00+00:00",
                "url": f"{url}/-/commit/{after}",
                "author": {"name": "Grace", "email": "[REDACTED]"},
                "added": [],
                "modified": ["infra/main.tf"],
                "removed": [],
            }
        ],
        "total_commits_count": 1,
    }


PAYLOADS = {
    "github": github_payload,
    "gitea": gitea_payload,
    "forgejo": gitea_payload,
    "gitlab": gitlab_payload,
}


def signed(dialect: str, secret: str, body: bytes, delivery: str, event: str = "push") -> dict[str, str]:
    """The headers each host sends with a delivery."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if dialect == "github":
        return {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery,
            "X-GitHub-Hook-ID": "292430182",
            "X-Hub-Signature-256": f"sha256={digest}",
            "User-Agent": "GitHub-Hookshot/044aadd",
            "Content-Type": "application/json",
        }
    if dialect in ("gitea", "forgejo"):
        # Gitea also sends GitHub's and Gogs' header names; the Gitea ones decide.
        prefix = "Forgejo" if dialect == "forgejo" else "Gitea"
        return {
            f"X-{prefix}-Event": event,
            f"X-{prefix}-Event-Type": event,
            f"X-{prefix}-Delivery": delivery,
            f"X-{prefix}-Signature": digest,
            "X-Gitea-Event": event,
            "X-Gitea-Delivery": delivery,
            "X-Gitea-Signature": digest,
            "X-Gogs-Event": event,
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": f"sha256={digest}",
            "Content-Type": "application/json",
        }
    return {
        "X-Gitlab-Event": "Push Hook" if event == "push" else event,
        "X-Gitlab-Token": secret,
        "X-Gitlab-Event-UUID": delivery,
        "X-Gitlab-Webhook-UUID": "13792a34-cac6-4fda-95a8-c58e00a3954e",
        "X-Gitlab-Instance": "https://gitlab.invalid",
        "User-Agent": "GitLab/17.6.0",
        "Content-Type": "application/json",
    }


class Hooks:
    def __init__(self, client: httpx.AsyncClient, tenant: Tenant, url: str, work: Path) -> None:
        self.client, self.tenant, self.url, self.work = client, tenant, url, work
        self.secret = ""

    @property
    def o(self) -> str:
        return f"/api/v1/orgs/{self.tenant.org}"

    async def setup(self, trigger: str = "plan") -> None:
        response = await self.client.post(f"{self.o}/git/webhook-secret", headers=self.tenant.headers)
        assert response.status_code == 201, response.text
        self.secret = response.json()["secret"]
        body = {
            "slug": "net",
            "repository": self.url,
            "path": "infra",
            "trigger": trigger,
            "git_https_token": TOKEN,
        }
        response = await self.client.post(f"{self.o}/stacks", json=body, headers=self.tenant.headers)
        assert response.status_code == 201, response.text

    async def send(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return await self.client.post(f"{self.o}/git/webhook", content=body, headers=headers)

    async def push_and_deliver(
        self, dialect: str, files: dict[str, str | None], *, delivery: str | None = None
    ) -> tuple[httpx.Response, str, str]:
        before = _head(self.work)
        head = commit_files(self.work, files, "Change", author=("Grace", "grace@example.com"))
        push(self.work, self.url, token=TOKEN)
        delivery = delivery or str(uuid.uuid4())
        body = json.dumps(PAYLOADS[dialect](self.url, "refs/heads/main", before, head)).encode()
        return await self.send(body, signed(dialect, self.secret, body, delivery)), head, delivery

    async def runs(self) -> list[dict[str, Any]]:
        response = await self.client.get(f"{self.o}/stacks/net/runs", headers=self.tenant.headers)
        return response.json()["runs"]  # type: ignore[no-any-return]


def _head(path: Path) -> str:
    import pygit2

    return str(pygit2.Repository(str(path)).head.target)


@pytest.fixture
async def hooks(client: httpx.AsyncClient, tenant: Tenant, origin: tuple[Path, str]) -> Hooks:
    work, url = origin
    return Hooks(client, tenant, url, work)


async def row_counts(ctx: Context) -> dict[str, Any]:
    async with ctx.db.read() as session:
        return {
            "runs": await session.scalar(select(func.count()).select_from(Run)),
            "history": await session.scalar(select(func.count()).select_from(RunStatusChange)),
            "deliveries": await session.scalar(select(func.count()).select_from(GitDelivery)),
            "seen": list(await session.scalars(select(Stack.git_seen_commit))),
        }


@pytest.mark.parametrize("dialect", sorted(PAYLOADS))
async def test_each_hosts_push_with_a_valid_signature_starts_one_run_at_once(
    hooks: Hooks, dialect: str
) -> None:
    await hooks.setup(trigger="apply")

    response, head, delivery = await hooks.push_and_deliver(dialect, {"infra/main.tf": MAIN_TF + "# v2\n"})

    assert response.status_code == 200, response.text
    [run] = await hooks.runs()
    assert response.json() == {"runs": [run["id"]], "ignored": []}
    assert run["type"] == "apply"
    assert run["trigger"] == {"kind": "push", "commit": head, "delivery": delivery}
    assert run["created_by"] == "git:grace@example.com"
    log = (await hooks.client.get(f"{hooks.o}/git/deliveries", headers=hooks.tenant.headers)).json()
    [entry] = log["deliveries"]
    source = "webhook:gitea" if dialect == "forgejo" else f"webhook:{dialect}"
    assert (entry["source"], entry["delivery"], entry["head"], entry["ref"]) == (
        source,
        delivery,
        head,
        "refs/heads/main",
    )
    assert entry["result"] == {"runs": [run["id"]], "ignored": []}


async def test_the_payloads_file_lists_are_a_hint_only(hooks: Hooks) -> None:
    await hooks.setup()
    # The GitHub payload lists docs/README.md as modified; the real diff touches infra/.
    response, _, _ = await hooks.push_and_deliver("github", {"infra/main.tf": MAIN_TF + "# v2\n"})
    assert len(response.json()["runs"]) == 1
    response, _, _ = await hooks.push_and_deliver("gitea", {"docs/README.md": "other\n"})
    assert response.json() == {
        "runs": [],
        "ignored": [
            {"stack": "net", "reason": "no changed file is under the stack's path or its watch globs"}
        ],
    }


def _tamper(dialect: str, headers: dict[str, str], how: str) -> dict[str, str]:
    names = {
        "github": ["X-Hub-Signature-256"],
        "gitea": ["X-Gitea-Signature"],
        "forgejo": ["X-Forgejo-Signature", "X-Gitea-Signature"],
        "gitlab": ["X-Gitlab-Token"],
    }[dialect]
    changed = dict(headers)
    for name in names:
        if how == "missing":
            changed.pop(name)
        elif how == "wrong":
            value = changed[name]
            changed[name] = value[:-1] + ("0" if value[-1] != "0" else "1")
        else:  # truncated
            changed[name] = changed[name][: len(changed[name]) // 2]
    return changed


@pytest.mark.parametrize("how", ["missing", "wrong", "truncated"])
@pytest.mark.parametrize("dialect", sorted(PAYLOADS))
async def test_a_missing_wrong_or_truncated_signature_is_401_and_stores_only_the_log_entry(
    hooks: Hooks, ctx: Context, dialect: str, how: str
) -> None:
    await hooks.setup()
    before = str(_head(hooks.work))
    head = commit_files(hooks.work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change")
    push(hooks.work, hooks.url, token=TOKEN)
    body = json.dumps(PAYLOADS[dialect](hooks.url, "refs/heads/main", before, head)).encode()
    headers = _tamper(dialect, signed(dialect, hooks.secret, body, "d-1"), how)
    counts = await row_counts(ctx)

    response = await hooks.send(body, headers)

    assert response.status_code == 401, response.text
    assert response.json()["error"]["code"] == "invalid_signature"
    after = await row_counts(ctx)
    assert after == {**counts, "deliveries": counts["deliveries"] + 1}
    log = (await hooks.client.get(f"{hooks.o}/git/deliveries", headers=hooks.tenant.headers)).json()
    assert log["deliveries"][0]["result"]["refused"] == "invalid_signature"
    assert log["deliveries"][0]["http_status"] == 401
    # The same delivery, signed, is then accepted: a refused one does not take its id.
    response = await hooks.send(body, signed(dialect, hooks.secret, body, "d-1"))
    assert len(response.json()["runs"]) == 1


async def test_a_replayed_delivery_starts_no_new_run(hooks: Hooks) -> None:
    await hooks.setup()
    response, head, delivery = await hooks.push_and_deliver("github", {"infra/main.tf": MAIN_TF + "# v2\n"})
    [run] = response.json()["runs"]
    before = str(head)
    # A replay, and a new delivery whose head moved again but reuses the id: neither starts a run.
    body = json.dumps(github_payload(hooks.url, "refs/heads/main", before, head)).encode()
    replay = await hooks.send(body, signed("github", hooks.secret, body, delivery))
    again, _, _ = await hooks.push_and_deliver(
        "github", {"infra/main.tf": MAIN_TF + "# v3\n"}, delivery=delivery
    )

    assert replay.status_code == again.status_code == 200
    assert replay.json() == again.json() == {"duplicate": True, "runs": []}
    assert [r["id"] for r in await hooks.runs()] == [run]


async def test_a_webhook_after_the_poll_found_the_commit_starts_nothing_more(
    hooks: Hooks, ctx: Context
) -> None:
    from firstlume.services.git.polling import cache_of, poll_once

    await hooks.setup()
    before = str(_head(hooks.work))
    head = commit_files(hooks.work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change")
    push(hooks.work, hooks.url, token=TOKEN)
    [outcome] = await poll_once(ctx, cache_of(ctx))
    body = json.dumps(gitlab_payload(hooks.url, "refs/heads/main", before, head)).encode()

    response = await hooks.send(body, signed("gitlab", hooks.secret, body, str(uuid.uuid4())))

    assert response.json()["runs"] == []
    assert [r["id"] for r in await hooks.runs()] == outcome.runs


async def _assert_nothing_but_a_log_entry(ctx: Context, counts: dict[str, Any], logged: int) -> None:
    after = await row_counts(ctx)
    assert after == {**counts, "deliveries": counts["deliveries"] + logged}


async def test_bad_input_gets_a_clear_answer_and_no_partial_rows(hooks: Hooks, ctx: Context) -> None:
    await hooks.setup()
    url, secret = hooks.url, hooks.secret
    head = _head(hooks.work)

    def deliver(payload: Any, dialect: str = "github", event: str = "push") -> tuple[bytes, dict[str, str]]:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return body, signed(dialect, secret, body, str(uuid.uuid4()), event)

    cases: list[tuple[str, tuple[bytes, dict[str, str]], int, Any, int]] = [
        # what, request, status, what the answer holds, delivery log entries written
        ("10 MB body", deliver(b"{" + b" " * (10 * 1024 * 1024) + b"}"), 413, "payload_too_large", 0),
        ("invalid JSON", deliver(b'{"ref": "refs/heads/main", '), 400, "invalid_json", 1),
        ("a JSON list", deliver([1, 2]), 422, "invalid_payload", 1),
        (
            "no after",
            deliver({"ref": "refs/heads/main", "repository": {"clone_url": url}}),
            422,
            "invalid_payload",
            1,
        ),
        (
            "a branch no stack follows",
            deliver(github_payload(url, "refs/heads/feature", head, "a" * 40)),
            200,
            {"runs": [], "ignored": [], "reason": "no stack follows branch 'feature' of this repository"},
            1,
        ),
        (
            "an unknown repository",
            deliver(github_payload("https://github.invalid/acme/other", "refs/heads/main", head, "b" * 40)),
            200,
            {"runs": [], "ignored": [], "reason": "no stack follows branch 'main' of this repository"},
            1,
        ),
        (
            "a deleted branch",
            deliver(github_payload(url, "refs/heads/main", head, ZERO)),
            200,
            {"runs": [], "ignored": [], "reason": "the branch was deleted"},
            1,
        ),
        (
            "a tag",
            deliver(gitea_payload(url, "refs/tags/v1", ZERO, head), "gitea"),
            200,
            {"runs": [], "ignored": [], "reason": "not a branch"},
            1,
        ),
        (
            "a ping",
            deliver({"zen": "Keep it logically awesome.", "hook_id": 1}, event="ping"),
            200,
            {"ignored": "event"},
            1,
        ),
        ("no host headers", (b"{}", {"Content-Type": "application/json"}), 400, "unsupported_webhook", 0),
    ]
    for what, (body, headers), status, expected, logged in cases:
        counts = await row_counts(ctx)
        response = await hooks.send(body, headers)
        assert response.status_code == status, (what, response.text)
        if isinstance(expected, str):
            assert response.json()["error"]["code"] == expected, what
            assert response.json()["error"]["message"], what
        else:
            assert response.json() == expected, what
        await _assert_nothing_but_a_log_entry(ctx, counts, logged)
    unknown_org = await hooks.client.post(
        "/api/v1/orgs/nope/git/webhook", content=b"{}", headers=deliver({})[1]
    )
    assert unknown_org.status_code == 404


async def test_the_webhook_secret_is_write_only_and_sealed(
    hooks: Hooks, ctx: Context, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from support.secrets import database_bytes

    caplog.set_level(logging.DEBUG)
    await hooks.setup()
    first = hooks.secret
    response = await hooks.client.post(f"{hooks.o}/git/webhook-secret", headers=hooks.tenant.headers)
    second = response.json()["secret"]
    assert response.status_code == 201 and second != first and len(second) >= 40
    log = await hooks.client.get(f"{hooks.o}/git/deliveries", headers=hooks.tenant.headers)
    stack = await hooks.client.get(f"{hooks.o}/stacks/net", headers=hooks.tenant.headers)
    assert log.json()["webhook_secret_set_at"]
    for text in (log.text, stack.text):
        assert first not in text and second not in text and TOKEN not in text
    # The old secret no longer signs; the new one does.
    hooks.secret = first
    refused, _, _ = await hooks.push_and_deliver("gitlab", {"infra/main.tf": MAIN_TF + "# v2\n"})
    assert refused.status_code == 401
    assert first not in refused.text
    hooks.secret = second
    accepted, _, _ = await hooks.push_and_deliver("gitlab", {"infra/main.tf": MAIN_TF + "# v3\n"})
    assert accepted.status_code == 200 and len(accepted.json()["runs"]) == 1
    # GitLab sends the secret itself: the delivery log keeps none of the headers.
    everything = database_bytes(database_url)
    for secret in (first, second, TOKEN):
        assert secret.encode() not in everything
        assert secret not in caplog.text
    await ctx.db.dispose()


async def test_a_stack_without_a_secret_refuses_every_delivery(hooks: Hooks, ctx: Context) -> None:
    body = json.dumps(github_payload(hooks.url, "refs/heads/main", ZERO, _head(hooks.work))).encode()
    response = await hooks.send(body, signed("github", "guess", body, "x"))
    assert response.status_code == 401
    assert "no webhook secret" in response.json()["error"]["message"]


async def test_the_same_delivery_sent_twice_at_once_starts_one_run(hooks: Hooks) -> None:
    await hooks.setup()
    before = _head(hooks.work)
    head = commit_files(hooks.work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change")
    push(hooks.work, hooks.url, token=TOKEN)
    body = json.dumps(github_payload(hooks.url, "refs/heads/main", before, head)).encode()
    headers = signed("github", hooks.secret, body, "same-delivery")

    first, second = await asyncio.gather(hooks.send(body, headers), hooks.send(body, headers))

    answers = sorted([first.json(), second.json()], key=lambda a: "duplicate" in a)
    [run] = await hooks.runs()
    assert answers[0] == {"runs": [run["id"]], "ignored": []}
    assert answers[1] == {"duplicate": True, "runs": []}


async def test_the_delivery_log_keeps_the_newest_entries_only(
    hooks: Hooks, ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from firstlume.services.git import pushes

    monkeypatch.setattr(pushes, "KEPT_DELIVERIES", 3)
    await hooks.setup()
    body = b"{}"
    for n in range(5):
        response = await hooks.send(body, {"X-GitHub-Event": "push", "X-GitHub-Delivery": f"bad-{n}"})
        assert response.status_code == 401
    log = (await hooks.client.get(f"{hooks.o}/git/deliveries", headers=hooks.tenant.headers)).json()
    assert [d["delivery"] for d in log["deliveries"]] == ["bad-4", "bad-3", "bad-2"]
