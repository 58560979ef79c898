"""Reads of pull requests: the organization's pull requests with their proposed runs, and the
feedback sent to Git hosts (statuses, comments) with each answer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Run, Stack
from firstlume.db.models_git import GitFeedback, PullRequest

MAX_PULL_REQUESTS = 100
MAX_FEEDBACK = 100


@dataclass(frozen=True)
class ProposedRunSummary:
    id: str
    number: int
    stack: str
    status: str
    head_sha: str | None
    created_at: datetime
    error: str | None
    summary: dict[str, int]


@dataclass(frozen=True)
class PullRequestRecord:
    id: str
    repository: str
    number: int
    url: str
    title: str
    author: str
    head_sha: str
    base_branch: str
    state: str
    updated_at: datetime
    runs: list[ProposedRunSummary]


async def pull_requests(
    session: AsyncSession, org_id: str, *, state: str | None = None, stack_slug: str | None = None
) -> list[PullRequestRecord]:
    """The newest pull requests (open: "open"; closed: closed or merged), each with its proposed
    runs newest first; with `stack_slug`, those with a run of that stack."""
    query = select(PullRequest).where(PullRequest.org_id == org_id)
    if state == "open":
        query = query.where(PullRequest.state == "open")
    elif state == "closed":
        query = query.where(PullRequest.state.in_(("closed", "merged")))
    if stack_slug is not None:
        query = query.where(
            PullRequest.id.in_(
                select(Run.pull_request_id)
                .join(Stack, Stack.id == Run.stack_id)
                .where(Run.org_id == org_id, Stack.slug == stack_slug, Stack.deleted_at.is_(None))
            )
        )
    pulls = list(
        await session.scalars(
            query.order_by(PullRequest.updated_at.desc(), PullRequest.id).limit(MAX_PULL_REQUESTS)
        )
    )
    runs: dict[str, list[ProposedRunSummary]] = {pull.id: [] for pull in pulls}
    if pulls:
        rows = await session.execute(
            select(Run, Stack.slug)
            .join(Stack, Stack.id == Run.stack_id)
            .where(Run.pull_request_id.in_(list(runs)), Stack.deleted_at.is_(None))
            .order_by(Run.created_at.desc(), Run.number.desc())
        )
        for run, slug in rows:
            if stack_slug is not None and slug != stack_slug:
                continue
            runs[run.pull_request_id or ""].append(
                ProposedRunSummary(
                    id=run.id,
                    number=run.number,
                    stack=slug,
                    status=run.status.value,
                    head_sha=run.trigger_commit,
                    created_at=run.created_at,
                    error=run.error,
                    summary={
                        "create": run.summary_create,
                        "update": run.summary_update,
                        "delete": run.summary_delete,
                        "replace": run.summary_replace,
                    },
                )
            )
    return [
        PullRequestRecord(
            id=pull.id,
            repository=pull.repository,
            number=pull.number,
            url=pull.url,
            title=pull.title,
            author=pull.author,
            head_sha=pull.head_sha,
            base_branch=pull.base_branch,
            state=pull.state,
            updated_at=pull.updated_at,
            runs=runs[pull.id],
        )
        for pull in pulls
    ]


@dataclass(frozen=True)
class FeedbackRecord:
    id: int
    kind: str
    repository: str
    number: int
    run_id: str | None
    payload: dict[str, Any]
    created_at: datetime
    attempts: int
    delivered_at: datetime | None
    given_up_at: datetime | None
    next_attempt_at: datetime
    attempts_log: list[dict[str, Any]]


async def feedback(session: AsyncSession, org_id: str, limit: int = MAX_FEEDBACK) -> list[FeedbackRecord]:
    """The newest statuses and comments sent (or being sent) to Git hosts, newest first."""
    rows = await session.execute(
        select(GitFeedback, PullRequest.repository, PullRequest.number)
        .join(PullRequest, PullRequest.id == GitFeedback.pull_request_id)
        .where(GitFeedback.org_id == org_id)
        .order_by(GitFeedback.id.desc())
        .limit(min(limit, MAX_FEEDBACK))
    )
    return [
        FeedbackRecord(
            id=row.id,
            kind=row.kind,
            repository=repository,
            number=number,
            run_id=row.run_id,
            payload=row.payload,
            created_at=row.created_at,
            attempts=row.attempts,
            delivered_at=row.delivered_at,
            given_up_at=row.given_up_at,
            next_attempt_at=row.next_attempt_at,
            attempts_log=row.attempts_log,
        )
        for row, repository, number in rows
    ]
