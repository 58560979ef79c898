"""Feedback to the Git host of a pull request: a commit status per stack and one comment per
pull request, through an outbox (the git_feedback table). Rows are written in the transaction of
the run change they report (a proposed run's start and its end), so none is lost; any replica's
sender posts them after commit with retries and exponential backoff (retry.notification_delivery,
FIRSTLUME_NOTIFICATION_FIRST_RETRY) for 24 hours, and records every answer. The host being down
never touches the run: sending happens apart from it.

A status row carries its snapshot (pending, then success/failure/error, in order). A comment row
carries nothing: the comment is built when sent, from the newest proposed run of each stack, so
the host always gets the current text; one comment per pull request is created once, its id kept
(pull_requests.comment_id), and edited for every new head.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import and_, delete, exists, func, or_, select, update
from sqlalchemy.orm import aliased

from firstlume import retry
from firstlume.background import BackgroundService
from firstlume.db.engine import Database
from firstlume.db.models import Organization, ResourceChange, Run, Stack
from firstlume.db.models_git import GitFeedback, PullRequest
from firstlume.db.types import utcnow
from firstlume.domain.pull_requests import (
    MAX_DESCRIPTION,
    CommitState,
    StackRow,
    commit_state,
    render_comment,
    status_context,
    status_description,
    summary_line,
)
from firstlume.domain.runs import RunStatus
from firstlume.services.context import Context, Unit
from firstlume.services.git.host_clients import TIMEOUT_SECONDS, HostRefused, Status, client_for
from firstlume.services.git.hosts import access_for, has_host
from firstlume.services.tls import public_tls_context

log = logging.getLogger("firstlume.git.feedback")

DESTRUCTIVE = ("delete", "replace")
GIVE_UP_AFTER = timedelta(hours=24)
RETENTION = timedelta(days=30)
BATCH = 20
MAX_ATTEMPTS_LOGGED = 50


def run_path(org_slug: str, run_id: str) -> str:
    return f"/orgs/{org_slug}/runs/{run_id}"


def run_summary(run: Run) -> str:
    return summary_line(
        run.summary_create or 0, run.summary_update or 0, run.summary_delete or 0, run.summary_replace or 0
    )


async def report(unit: Unit, run: Run, status: RunStatus) -> None:
    """Writes the status (and a comment refresh) of a proposed run that started or ended, when
    its repository's host is configured; nothing otherwise."""
    if not run.proposed or run.pull_request_id is None:
        return
    session = unit.session
    pull = await session.get(PullRequest, run.pull_request_id)
    if pull is None or not await has_host(session, run.org_id, pull.repository):
        return
    stack = await session.get(Stack, run.stack_id)
    org = await session.get(Organization, run.org_id)
    assert stack is not None and org is not None
    now = utcnow()
    session.add(
        GitFeedback(
            org_id=run.org_id,
            pull_request_id=pull.id,
            kind="status",
            run_id=run.id,
            payload={
                "sha": run.trigger_commit,
                "state": commit_state(status).value,
                "context": status_context(stack.slug),
                "description": status_description(status, run_summary(run), run.error),
                "target_url": run_path(org.slug, run.id),
            },
            created_at=now,
            next_attempt_at=now,
            attempts=0,
            attempts_log=[],
        )
    )
    # Always a row of its own: a row already waiting might be taken (and its text built) before
    # this change commits. The sender posts a pull request's rows in order, so the last one
    # sends the text as of the last change.
    session.add(
        GitFeedback(
            org_id=run.org_id,
            pull_request_id=pull.id,
            kind="comment",
            run_id=run.id,
            payload={},
            created_at=now,
            next_attempt_at=now,
            attempts=0,
            attempts_log=[],
        )
    )
    unit.wrote_git_feedback = True


async def report_not_planned(unit: Unit, pull: PullRequest, stack_slug: str, description: str) -> None:
    """A status saying why a stack did not plan the pull request's head (a fork, by default)."""
    session = unit.session
    if not await has_host(session, pull.org_id, pull.repository):
        return
    org = await session.get(Organization, pull.org_id)
    assert org is not None
    now = utcnow()
    session.add(
        GitFeedback(
            org_id=pull.org_id,
            pull_request_id=pull.id,
            kind="status",
            run_id=None,
            payload={
                "sha": pull.head_sha,
                "state": CommitState.ERROR.value,
                "context": status_context(stack_slug),
                "description": description[:MAX_DESCRIPTION],
                "target_url": f"/orgs/{org.slug}/stacks/{stack_slug}",
            },
            created_at=now,
            next_attempt_at=now,
            attempts=0,
            attempts_log=[],
        )
    )
    unit.wrote_git_feedback = True


async def comment_text(ctx: Context, pull_request_id: str) -> str:
    """The pull request's comment as of now: each stack's newest proposed run."""
    async with ctx.db.read() as session:
        newer = aliased(Run)
        runs = list(
            await session.execute(
                select(Run, Stack.slug, Organization.slug)
                .join(Stack, Stack.id == Run.stack_id)
                .join(Organization, Organization.id == Run.org_id)
                .where(
                    Run.pull_request_id == pull_request_id,
                    ~exists().where(
                        newer.pull_request_id == pull_request_id,
                        newer.stack_id == Run.stack_id,
                        newer.number > Run.number,
                    ),
                )
                .order_by(Stack.slug)
            )
        )
        rows = []
        for run, stack_slug, org_slug in runs:
            destructive = and_(ResourceChange.run_id == run.id, ResourceChange.action.in_(DESTRUCTIVE))
            count = await session.scalar(select(func.count()).select_from(ResourceChange).where(destructive))
            shown = list(
                await session.execute(
                    select(ResourceChange.action, ResourceChange.address)
                    .where(destructive)
                    .order_by(ResourceChange.position)
                    .limit(50)
                )
            )
            rows.append(
                StackRow(
                    stack=stack_slug,
                    run_number=run.number,
                    status=RunStatus(run.status),
                    summary=run_summary(run),
                    url=ctx.settings.public_url.rstrip("/") + run_path(org_slug, run.id),
                    head_sha=run.trigger_commit or "",
                    deletions=[(action, address) for action, address in shown],
                    deletion_count=int(count or 0),
                )
            )
    return render_comment(rows)


class GitFeedbackSender(BackgroundService):
    def __init__(
        self,
        ctx: Context,
        *,
        db: Database | None = None,
        interval: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__("git-feedback-sender", interval=interval, log=log)
        self.ctx = ctx
        self.db = db or ctx.db
        self.lease = timedelta(seconds=ctx.settings.notification_lease)
        self.retries = retry.notification_delivery(ctx.settings.notification_first_retry)
        self._http = httpx.AsyncClient(
            verify=public_tls_context(),
            timeout=httpx.Timeout(TIMEOUT_SECONDS),
            follow_redirects=False,
            trust_env=False,
            transport=transport,
        )
        self._next_cleanup: float | None = None

    async def stop(self) -> None:
        await super().stop()
        await self._http.aclose()

    async def run_pass(self) -> None:
        while await self.send_due():
            pass
        loop = asyncio.get_running_loop()
        if self._next_cleanup is None or loop.time() >= self._next_cleanup:
            async with self.db.transaction() as session:
                await session.execute(
                    delete(GitFeedback).where(
                        GitFeedback.created_at < utcnow() - RETENTION,
                        or_(GitFeedback.delivered_at.is_not(None), GitFeedback.given_up_at.is_not(None)),
                    )
                )
            self._next_cleanup = loop.time() + 3600.0

    async def send_due(self) -> int:
        claimed = await self._claim(utcnow())
        # In order: a pull request's pending status goes before its success.
        for row_id in claimed:
            await self._attempt(row_id)
        return len(claimed)

    async def _claim(self, now: datetime) -> list[int]:
        async with self.db.read() as session:
            candidates = list(
                await session.scalars(
                    select(GitFeedback.id)
                    .where(_due(now))
                    .order_by(GitFeedback.next_attempt_at, GitFeedback.id)
                    .limit(BATCH)
                )
            )
        if not candidates:
            return []
        claimed: list[int] = []
        async with self.db.transaction() as session:
            for row_id in candidates:
                earlier = aliased(GitFeedback)
                result = await session.execute(
                    update(GitFeedback)
                    .where(
                        GitFeedback.id == row_id,
                        _due(now),
                        # One message per pull request at a time, oldest first: its statuses stay
                        # in order and its comment is created once.
                        ~exists().where(
                            earlier.pull_request_id == GitFeedback.pull_request_id,
                            earlier.id < GitFeedback.id,
                            earlier.delivered_at.is_(None),
                            earlier.given_up_at.is_(None),
                        ),
                    )
                    .values(leased_until=now + self.lease)
                    .execution_options(synchronize_session=False)
                )
                if result.rowcount == 1:  # type: ignore[attr-defined]
                    claimed.append(row_id)
        return claimed

    async def _attempt(self, row_id: int) -> None:
        async with self.db.read() as session:
            row = await session.get(GitFeedback, row_id)
            pull = await session.get(PullRequest, row.pull_request_id) if row else None
            access = (
                await access_for(session, self.ctx.keyring, pull.org_id, pull.repository) if pull else None
            )
        if row is None or pull is None:
            return
        status_code: int | None = None
        error: str | None = None
        comment_id: str | None = None
        if access is None:
            error = "no Git host is configured for this repository's host (PUT .../git/hosts/<host>)"
        else:
            client = client_for(access.kind, self._http, access.api_url, access.token, access.repository_path)
            try:
                if row.kind == "status":
                    payload = row.payload
                    await client.set_status(
                        Status(
                            sha=payload["sha"],
                            state=CommitState(payload["state"]),
                            context=payload["context"],
                            description=payload["description"],
                            target_url=self.ctx.settings.public_url.rstrip("/") + payload["target_url"],
                        )
                    )
                    status_code = 201
                else:
                    text = await comment_text(self.ctx, pull.id)
                    if pull.comment_id:
                        await client.edit_comment(pull.number, pull.comment_id, text)
                        status_code = 200
                    else:
                        comment_id = await client.create_comment(pull.number, text)
                        status_code = 201
            except HostRefused as refusal:
                status_code, error = refusal.status_code, str(refusal)
        await self._record(row, status_code, error, comment_id)

    async def _record(
        self, row: GitFeedback, status_code: int | None, error: str | None, comment_id: str | None
    ) -> None:
        now = utcnow()
        number = row.attempts + 1
        entry: dict[str, Any] = {"at": now.isoformat(), "status_code": status_code, "error": error}
        values: dict[str, Any] = {
            "attempts": number,
            "leased_until": None,
            "attempts_log": [*row.attempts_log, entry][-MAX_ATTEMPTS_LOGGED:],
        }
        if error is None:
            values["delivered_at"] = now
        else:
            retry_at = now + timedelta(seconds=self.retries.delay(number))
            if retry_at > row.created_at + GIVE_UP_AFTER:
                values["given_up_at"] = now
            else:
                values["next_attempt_at"] = retry_at
            log.warning("git feedback %s (%s) attempt %d: %s", row.id, row.kind, number, error)
        async with self.db.transaction() as session:
            await session.execute(
                update(GitFeedback)
                .where(GitFeedback.id == row.id)
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if comment_id:
                await session.execute(
                    update(PullRequest)
                    .where(PullRequest.id == row.pull_request_id)
                    .values(comment_id=comment_id)
                    .execution_options(synchronize_session=False)
                )


def _due(now: datetime) -> Any:
    return and_(
        GitFeedback.delivered_at.is_(None),
        GitFeedback.given_up_at.is_(None),
        GitFeedback.next_attempt_at <= now,
        or_(GitFeedback.leased_until.is_(None), GitFeedback.leased_until < now),
    )
