"""Push webhooks of GitHub, Gitea/Forgejo and GitLab: which host sent one, whether it carries
the organization's signature (compared in constant time), and what its push payload says.

Headers and payload fields are those of the hosts' published documentation:
- GitHub: X-GitHub-Event, X-GitHub-Delivery, X-Hub-Signature-256 ("sha256=" + hex HMAC-SHA256
  of the raw body); repository.clone_url, ssh_url, html_url, git_url.
- Gitea: X-Gitea-Event, X-Gitea-Delivery, X-Gitea-Signature (hex HMAC-SHA256); Forgejo sends
  the same as X-Forgejo-*. repository.clone_url, ssh_url, html_url.
- GitLab: X-Gitlab-Event ("Push Hook"), X-Gitlab-Event-UUID, X-Gitlab-Token (the secret
  itself); project.git_http_url, git_ssh_url, web_url.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from firstlume.domain.errors import InvalidPayload, InvalidSignature, UnsupportedWebhook, WebhookNotJson
from firstlume.domain.git import ZERO_SHA, Dialect

SHA = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")
BRANCH_PREFIX = "refs/heads/"
MAX_DELIVERY_ID = 100


@dataclass(frozen=True)
class Hook:
    """What the headers say: the host, the event, the delivery id and the signature sent."""

    dialect: Dialect
    event: str
    delivery: str | None
    signature: str | None

    @property
    def source(self) -> str:
        return f"webhook:{self.dialect}"

    @property
    def is_push(self) -> bool:
        return self.event.lower() in ("push", "push hook")

    @property
    def is_pull_request(self) -> bool:
        return self.event.lower() in ("pull_request", "merge request hook")


@dataclass(frozen=True)
class Push:
    ref: str
    before: str | None
    after: str
    repository_urls: list[str]

    @property
    def branch(self) -> str | None:
        return self.ref[len(BRANCH_PREFIX) :] if self.ref.startswith(BRANCH_PREFIX) else None

    @property
    def deletes_branch(self) -> bool:
        return self.after == ZERO_SHA

    @property
    def repository(self) -> str:
        return self.repository_urls[0] if self.repository_urls else ""


def identify(headers: Mapping[str, str]) -> Hook:
    """The host that sent the request. Gitea and Forgejo also send X-GitHub-Event, so they are
    recognized first."""

    def header(name: str) -> str | None:
        value = headers.get(name)
        return value.strip()[:MAX_DELIVERY_ID] if value and value.strip() else None

    for prefix in ("Forgejo", "Gitea"):
        event = header(f"X-{prefix}-Event")
        if event:
            return Hook(
                Dialect.GITEA, event, header(f"X-{prefix}-Delivery"), headers.get(f"X-{prefix}-Signature")
            )
    event = header("X-Gitlab-Event")
    if event:
        return Hook(Dialect.GITLAB, event, header("X-Gitlab-Event-UUID"), headers.get("X-Gitlab-Token"))
    event = header("X-GitHub-Event")
    if event:
        return Hook(Dialect.GITHUB, event, header("X-GitHub-Delivery"), headers.get("X-Hub-Signature-256"))
    raise UnsupportedWebhook(
        "Send a push webhook of GitHub (X-GitHub-Event), Gitea or Forgejo (X-Gitea-Event, "
        "X-Forgejo-Event) or GitLab (X-Gitlab-Event)."
    )


def verify(hook: Hook, body: bytes, secret: str | None) -> None:
    """Raises InvalidSignature unless the request carries the organization's signature."""
    if secret is None:
        raise InvalidSignature(
            "This organization has no webhook secret yet: create one with POST .../git/webhook-secret."
        )
    sent = hook.signature
    if not sent:
        raise InvalidSignature(f"The request has no {_signature_header(hook.dialect)} header.")
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    expected = {
        Dialect.GITHUB: "sha256=" + digest,
        Dialect.GITEA: digest,
        Dialect.GITLAB: secret,
    }[hook.dialect]
    if not hmac.compare_digest(expected.encode(), sent.strip().encode("utf-8", "replace")):
        raise InvalidSignature(
            f"The {_signature_header(hook.dialect)} header does not match the webhook secret."
        )


def _signature_header(dialect: Dialect) -> str:
    return {
        Dialect.GITHUB: "X-Hub-Signature-256",
        Dialect.GITEA: "X-Gitea-Signature (or X-Forgejo-Signature)",
        Dialect.GITLAB: "X-Gitlab-Token",
    }[dialect]


def parse_push(hook: Hook, body: bytes) -> Push:
    """The push payload's ref, before, after and repository URLs; InvalidPayload otherwise."""
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise WebhookNotJson(f"The webhook body is not valid JSON: {error}.") from None
    if not isinstance(payload, dict):
        raise InvalidPayload("The webhook body must be a JSON object (the host's push payload).")
    ref = payload.get("ref")
    if not isinstance(ref, str) or not ref.startswith("refs/") or len(ref) > 300:
        raise InvalidPayload("The push payload's 'ref' must be a Git ref such as \"refs/heads/main\".")
    after = _sha(payload, "after")
    if after is None:
        raise InvalidPayload("The push payload's 'after' must be a commit SHA (40 hex digits).")
    before = _sha(payload, "before")
    urls = _repository_urls(hook.dialect, payload)
    if not urls:
        raise InvalidPayload(
            "The push payload names no repository URL (repository.clone_url, ssh_url, html_url; "
            "GitLab: project.git_http_url, git_ssh_url)."
        )
    return Push(ref=ref, before=None if before == ZERO_SHA else before, after=after, repository_urls=urls)


def _sha(payload: dict[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value.lower() if isinstance(value, str) and SHA.match(value.lower()) else None


def repository_urls(dialect: Dialect, payload: dict[str, Any]) -> list[str]:
    """The repository's URLs a payload names (GitLab: its project's)."""
    return _repository_urls(dialect, payload)


def _repository_urls(dialect: Dialect, payload: dict[str, Any]) -> list[str]:
    if dialect is Dialect.GITLAB:
        sources = [
            (payload.get("project"), ("git_http_url", "git_ssh_url", "web_url", "http_url", "ssh_url")),
            (payload.get("repository"), ("git_http_url", "git_ssh_url", "homepage", "url")),
        ]
    else:
        sources = [(payload.get("repository"), ("clone_url", "ssh_url", "html_url", "git_url", "url"))]
    urls: list[str] = []
    for section, keys in sources:
        if not isinstance(section, dict):
            continue
        for key in keys:
            value = section.get(key)
            if isinstance(value, str) and value.strip() and len(value) <= 2000 and value not in urls:
                urls.append(value.strip())
    return urls
