"""Pull-request webhooks in tests: payloads shaped like each host's published documentation
(GitHub and Gitea `pull_request`, GitLab "Merge Request Hook"), and pushing a PR head the way
hosts keep it (refs/pull/<n>/head, refs/merge-requests/<n>/head)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2

HEAD_REFS = {
    "github": "refs/pull/{n}/head",
    "gitea": "refs/pull/{n}/head",
    "forgejo": "refs/pull/{n}/head",
    "gitlab": "refs/merge-requests/{n}/head",
}

# The action each host sends for: a new PR, a new head, a close, a merge.
ACTIONS = {
    "github": {"open": "opened", "push": "synchronize", "close": "closed", "merge": "closed"},
    "gitea": {"open": "opened", "push": "synchronized", "close": "closed", "merge": "closed"},
    "forgejo": {"open": "opened", "push": "synchronized", "close": "closed", "merge": "closed"},
    "gitlab": {"open": "open", "push": "update", "close": "close", "merge": "merge"},
}


def push_pull_request_head(work: Path, url: str, dialect: str, number: int, branch: str, token: str) -> None:
    """Pushes `branch` of `work` to the ref the host keeps the PR's head at."""
    repo = pygit2.Repository(str(work))
    name = "firstlume-test-origin"
    if name in repo.remotes.names():
        repo.remotes.set_url(name, url)
    else:
        repo.remotes.create(name, url)
    callbacks = pygit2.RemoteCallbacks(credentials=pygit2.UserPass("x-access-token", token))
    target = HEAD_REFS[dialect].format(n=number)
    repo.remotes[name].push([f"+refs/heads/{branch}:{target}"], callbacks=callbacks)


def github_pull_request(
    url: str,
    number: Any,
    action: str,
    head: str,
    *,
    base: str = "main",
    fork: bool = False,
    merged: bool = False,
) -> dict[str, Any]:
    """https://docs.github.com/en/webhooks/webhook-events-and-payloads#pull_request (trimmed);
    Gitea/Forgejo send the same shape (https://docs.gitea.com/usage/webhooks)."""
    html = url.removesuffix(".git")
    base_repo = {
        "id": 1296269,
        "name": "infra",
        "full_name": "acme/infra",
        "fork": False,
        "html_url": html,
        "clone_url": html + ".git",
        "ssh_url": "git@github.invalid:acme/infra.git",
    }
    head_repo = (
        {
            **base_repo,
            "id": 99,
            "full_name": "mallory/infra",
            "fork": True,
            "html_url": "https://x.invalid/m/infra",
        }
        if fork
        else base_repo
    )
    return {
        "action": action,
        "number": number,
        "pull_request": {
            "url": f"{html}/pulls/{number}",
            "id": 1,
            "number": number,
            "html_url": f"{html}/pull/{number}",
            "state": "closed" if action == "closed" else "open",
            "title": "Widen the network",
            "user": {"login": "grace", "id": 2, "type": "User"},
            "body": "Please review",
            "merged": merged,
            "head": {"label": "grace:feature", "ref": "feature", "sha": head, "repo": head_repo},
            "base": {"label": "acme:main", "ref": base, "sha": "0" * 40, "repo": base_repo},
        },
        "repository": base_repo,
        "sender": {"login": "grace", "id": 2, "type": "User"},
    }


def gitlab_merge_request(
    url: str, number: Any, action: str, head: str, *, base: str = "main", fork: bool = False
) -> dict[str, Any]:
    """https://docs.gitlab.com/user/project/integrations/webhook_events/#merge-request-events"""
    project = {
        "id": 15,
        "name": "infra",
        "web_url": url,
        "git_ssh_url": "git@gitlab.invalid:acme/infra.git",
        "git_http_url": url + ".git",
        "namespace": "acme",
        "path_with_namespace": "acme/infra",
        "default_branch": "main",
    }
    return {
        "object_kind": "merge_request",
        "event_type": "merge_request",
        "user": {"id": 1, "name": "Grace", "username": "grace", "email": "[REDACTED]"},
        "project": project,
        "object_attributes": {
            "id": 99,
            "iid": number,
            "target_branch": base,
            "source_branch": "feature",
            "source_project_id": 16 if fork else 15,
            "target_project_id": 15,
            "title": "Widen the network",
            "state": {"close": "closed", "merge": "merged"}.get(action, "opened"),
            "url": f"{url}/-/merge_requests/{number}",
            "last_commit": {"id": head, "message": "Change", "author": {"name": "Grace", "email": "g@x"}},
            "action": action,
        },
        "repository": {"name": "infra", "url": "git@gitlab.invalid:acme/infra.git", "homepage": url},
    }


def pull_request_payload(
    dialect: str, url: str, number: Any, what: str, head: str, **options: Any
) -> dict[str, Any]:
    action = ACTIONS[dialect][what]
    if dialect == "gitlab":
        return gitlab_merge_request(url, number, action, head, **options)
    return github_pull_request(url, number, action, head, merged=what == "merge", **options)


def pull_request_event(dialect: str) -> str:
    return "Merge Request Hook" if dialect == "gitlab" else "pull_request"
