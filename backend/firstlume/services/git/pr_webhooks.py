"""Pull-request webhooks of GitHub, Gitea/Forgejo and GitLab: what their payloads say, read into
one shape. Fields are those of the hosts' published documentation:
- GitHub `pull_request` event: action (opened, synchronize, reopened, closed), number,
  pull_request.{html_url, title, user.login, head.{ref, sha, repo}, base.{ref, repo}, merged}.
- Gitea/Forgejo `pull_request` event: the same shape; a new head is action "synchronized".
- GitLab "Merge Request Hook": object_attributes.{iid, url, title, action (open, update, reopen,
  close, merge), source_branch, target_branch, last_commit.id, source_project_id,
  target_project_id}, user.username, project (the target project's URLs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from firstlume.domain.errors import InvalidPayload, WebhookNotJson
from firstlume.domain.git import Dialect, head_ref
from firstlume.services.git.webhooks import SHA, Hook, repository_urls

MAX_TEXT = 1000


class PullRequestAction(StrEnum):
    """What happened to the pull request, whatever the host calls it."""

    HEAD = "head"  # opened, reopened or a new head: plan it
    CLOSED = "closed"
    MERGED = "merged"
    OTHER = "other"  # labels, reviews, edits: nothing to plan


_ACTIONS = {
    "opened": PullRequestAction.HEAD,
    "reopened": PullRequestAction.HEAD,
    "synchronize": PullRequestAction.HEAD,
    "synchronized": PullRequestAction.HEAD,  # Gitea's name for a new head
    "open": PullRequestAction.HEAD,
    "reopen": PullRequestAction.HEAD,
    "update": PullRequestAction.HEAD,  # GitLab; an update that keeps the head plans nothing new
    "close": PullRequestAction.CLOSED,
    "closed": PullRequestAction.CLOSED,
    "merge": PullRequestAction.MERGED,
}


@dataclass(frozen=True)
class PullRequestEvent:
    action: PullRequestAction
    raw_action: str
    number: int
    url: str
    title: str
    author: str
    head_sha: str
    head_ref: str  # the ref Firstlume fetches the head from
    base_branch: str
    repository_urls: list[str]  # the base repository's
    from_fork: bool

    @property
    def repository(self) -> str:
        return self.repository_urls[0] if self.repository_urls else ""

    def fields(self) -> dict[str, Any]:
        """The run trigger's `pull_request`."""
        return {
            "number": self.number,
            "url": self.url,
            "title": self.title,
            "author": self.author,
            "head_sha": self.head_sha,
            "base_branch": self.base_branch,
        }


def parse_pull_request(hook: Hook, body: bytes) -> PullRequestEvent:
    """The event's pull request; InvalidPayload (422) for anything Firstlume cannot read."""
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise WebhookNotJson(f"The webhook body is not valid JSON: {error}.") from None
    if not isinstance(payload, dict):
        raise InvalidPayload("The webhook body must be a JSON object (the host's pull-request payload).")
    if hook.dialect is Dialect.GITLAB:
        return _gitlab(payload)
    return _github_like(hook.dialect, payload)


def _section(payload: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = payload.get(key)
    if not isinstance(value, dict):
        raise InvalidPayload(f"The pull-request payload has no '{where}' object.")
    return value


def _object(payload: dict[str, Any], key: str) -> dict[str, Any]:
    value = payload.get(key)
    return value if isinstance(value, dict) else {}


def _number(value: Any, where: str) -> int:
    # bool is an int in Python; a PR number is not a flag.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise InvalidPayload(f"The pull-request payload's '{where}' must be a positive whole number.")
    return value


def _text(value: Any, where: str, *, required: bool = True) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()[:MAX_TEXT]
    if required:
        raise InvalidPayload(f"The pull-request payload's '{where}' must be a non-empty string.")
    return ""


def _sha(value: Any, where: str) -> str:
    if isinstance(value, str) and SHA.match(value.lower()):
        return value.lower()
    raise InvalidPayload(f"The pull-request payload's '{where}' must be a commit SHA (40 hex digits).")


def _branch(value: Any, where: str) -> str:
    branch = _text(value, where)
    if len(branch) > 255 or ".." in branch or branch.startswith("-"):
        raise InvalidPayload(f"The pull-request payload's '{where}' is not a branch name.")
    return branch


def _action(value: Any) -> tuple[PullRequestAction, str]:
    raw = _text(value, "action")[:50]
    return _ACTIONS.get(raw.lower(), PullRequestAction.OTHER), raw


def _github_like(dialect: Dialect, payload: dict[str, Any]) -> PullRequestEvent:
    action, raw = _action(payload.get("action"))
    pull = _section(payload, "pull_request", "pull_request")
    number = _number(pull.get("number", payload.get("number")), "pull_request.number")
    head = _section(pull, "head", "pull_request.head")
    base = _section(pull, "base", "pull_request.base")
    if action is PullRequestAction.CLOSED and pull.get("merged") is True:
        action = PullRequestAction.MERGED
    urls = repository_urls(dialect, payload)
    if not urls:
        raise InvalidPayload(
            "The pull-request payload names no repository URL (repository.clone_url, html_url)."
        )
    head_repo, base_repo = _object(head, "repo"), _object(base, "repo")
    head_name, base_name = head_repo.get("full_name"), base_repo.get("full_name")
    from_fork = bool(head_repo.get("fork")) or (
        isinstance(head_name, str) and isinstance(base_name, str) and head_name != base_name
    )
    user = _object(pull, "user")
    return PullRequestEvent(
        action=action,
        raw_action=raw,
        number=number,
        url=_text(pull.get("html_url"), "pull_request.html_url", required=False),
        title=_text(pull.get("title"), "pull_request.title", required=False),
        author=_text(user.get("login"), "pull_request.user.login", required=False)[:400],
        head_sha=_sha(head.get("sha"), "pull_request.head.sha"),
        head_ref=head_ref(dialect.value, number),
        base_branch=_branch(base.get("ref"), "pull_request.base.ref"),
        repository_urls=urls,
        from_fork=from_fork,
    )


def _gitlab(payload: dict[str, Any]) -> PullRequestEvent:
    attributes = _section(payload, "object_attributes", "object_attributes")
    action, raw = _action(attributes.get("action"))
    number = _number(attributes.get("iid"), "object_attributes.iid")
    last_commit = _section(attributes, "last_commit", "object_attributes.last_commit")
    urls = repository_urls(Dialect.GITLAB, payload)
    if not urls:
        raise InvalidPayload("The merge-request payload names no repository URL (project.git_http_url).")
    source, target = attributes.get("source_project_id"), attributes.get("target_project_id")
    user = _object(payload, "user")
    return PullRequestEvent(
        action=action,
        raw_action=raw,
        number=number,
        url=_text(attributes.get("url"), "object_attributes.url", required=False),
        title=_text(attributes.get("title"), "object_attributes.title", required=False),
        author=_text(user.get("username"), "user.username", required=False)[:400],
        head_sha=_sha(last_commit.get("id"), "object_attributes.last_commit.id"),
        head_ref=head_ref(Dialect.GITLAB.value, number),
        base_branch=_branch(attributes.get("target_branch"), "object_attributes.target_branch"),
        repository_urls=urls,
        from_fork=source is not None and target is not None and source != target,
    )
