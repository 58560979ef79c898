"""Pull requests in the schema: the organization's pull requests with their proposed runs, and
its Git hosts (the token is write-only)."""

from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry

from firstlume.services.git.hosts import HostRecord
from firstlume.services.reads.pull_requests import ProposedRunSummary, PullRequestRecord


@strawberry.enum(description="Which Git host's REST API receives statuses and comments.")
class GitHostKind(Enum):
    GITHUB = "github"
    GITLAB = "gitlab"
    GITEA = "gitea"


@strawberry.type(description="A Git host of the organization; its token is write-only.")
class GitHost:
    host: str
    kind: GitHostKind
    api_url: str
    token_set: bool
    updated_at: datetime

    @staticmethod
    def of(row: HostRecord) -> GitHost:
        return GitHost(
            host=row.host,
            kind=GitHostKind(row.kind.value),
            api_url=row.api_url,
            token_set=True,
            updated_at=row.updated_at,
        )


@strawberry.type(description="A proposed run of a pull request: a plan that never applies.")
class ProposedRun:
    id: strawberry.ID
    number: int
    stack: str
    status: str
    head_sha: str | None
    created_at: datetime
    error: str | None
    to_create: int
    to_update: int
    to_delete: int
    to_replace: int

    @staticmethod
    def of(row: ProposedRunSummary) -> ProposedRun:
        return ProposedRun(
            id=strawberry.ID(row.id),
            number=row.number,
            stack=row.stack,
            status=row.status,
            head_sha=row.head_sha,
            created_at=row.created_at,
            error=row.error,
            to_create=row.summary["create"],
            to_update=row.summary["update"],
            to_delete=row.summary["delete"],
            to_replace=row.summary["replace"],
        )


@strawberry.type(description="A pull (merge) request seen by the organization's webhook.")
class PullRequest:
    repository: str
    number: int
    url: str
    title: str
    author: str
    head_sha: str
    base_branch: str
    state: str = strawberry.field(description="open, closed or merged.")
    updated_at: datetime
    runs: list[ProposedRun] = strawberry.field(description="Its proposed runs, newest first.")

    @staticmethod
    def of(row: PullRequestRecord) -> PullRequest:
        return PullRequest(
            repository=row.repository,
            number=row.number,
            url=row.url,
            title=row.title,
            author=row.author,
            head_sha=row.head_sha,
            base_branch=row.base_branch,
            state=row.state,
            updated_at=row.updated_at,
            runs=[ProposedRun.of(run) for run in row.runs],
        )
