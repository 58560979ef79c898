"""What a pull-request event does: for each stack that plans pull requests (`pull_requests:
plan`) and follows the PR's base repository and branch, fetch the PR head, diff it against the
merge base, and if it touches the stack start one proposed run; a new head supersedes the PR's
queued proposed runs, closing or merging the PR cancels them. The delivery id is claimed in the
same transaction as the runs, so a replay starts nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from firstlume.db.models import Run, Stack, new_id
from firstlume.db.models_git import GitDelivery, PullRequest
from firstlume.db.types import utcnow
from firstlume.domain.git import ForkPolicy, PullRequestMode, short_sha, touches_stack
from firstlume.domain.runs import RunStatus, RunType, TriggerKind
from firstlume.protocol.events import GitDeliveryLogged
from firstlume.pubsub import org_git_channel
from firstlume.services.commands import StartRun
from firstlume.services.context import Context, Unit
from firstlume.services.git import feedback as git_feedback
from firstlume.services.git.polling import cache_of
from firstlume.services.git.pr_webhooks import PullRequestAction, PullRequestEvent
from firstlume.services.git.pushes import StackView, follows, prune_deliveries, view_of, watch_globs
from firstlume.services.git.remote import ProposedChange, RemoteError, fetch_pull_request
from firstlume.services.git.webhooks import Hook
from firstlume.services.inherited import effective_settings
from firstlume.services.reads.catalog import OrganizationRecord
from firstlume.services.runs import Trigger, start_run
from firstlume.services.transitions import change_status

FORKS_OFF_STATUS = "Not planned: pull requests from forks are off (pull_requests_from_forks)"
FORKS_OFF = (
    "the pull request comes from a fork, and pull requests from forks are not planned "
    "(pull_requests_from_forks is off): its code would run with the stack's variables"
)


class Duplicate(Exception):
    """The delivery id was taken by an earlier delivery: nothing happens again."""


@dataclass
class _Plan:
    stack: StackView
    change: ProposedChange | None
    reason: str
    forks_off: bool = False


async def proposing_stacks(
    ctx: Context, org_id: str, event: PullRequestEvent
) -> tuple[list[StackView], dict[str, ForkPolicy]]:
    """The stacks that plan this pull request (`pull_requests: plan`, following its base
    repository and branch), and each one's `pull_requests_from_forks` setting."""
    async with ctx.db.read() as session:
        stacks = [
            stack
            for stack in await session.scalars(
                select(Stack)
                .where(
                    Stack.org_id == org_id,
                    Stack.deleted_at.is_(None),
                    Stack.pull_requests == PullRequestMode.PLAN.value,
                )
                .order_by(Stack.slug)
            )
            if follows(stack, event.repository_urls, event.base_branch)
        ]
        policies = {
            stack.id: ForkPolicy((await effective_settings(session, stack))["pull_requests_from_forks"].value)
            for stack in stacks
        }
        return [view_of(ctx, stack) for stack in stacks], policies


async def handle_pull_request(
    ctx: Context, org: OrganizationRecord, hook: Hook, event: PullRequestEvent
) -> dict[str, Any]:
    """Starts or cancels the proposed runs `event` calls for; logs the delivery with its result.
    Raises Duplicate for a delivery id seen before."""
    stacks, policies = await proposing_stacks(ctx, org.id, event)
    answer: dict[str, Any] = {"runs": [], "ignored": []}
    plans: list[_Plan] = []
    if event.action is PullRequestAction.HEAD:
        for stack in stacks:
            plans.append(await _decide(ctx, event, stack, policies[stack.id]))
    async with ctx.unit() as unit:
        row = await _claim(unit, org.id, hook, event)
        pull = await _pull_request_row(unit, org.id, hook, event)
        if event.action is PullRequestAction.HEAD:
            for plan in plans:
                if plan.change is None:
                    answer["ignored"].append({"stack": plan.stack.slug, "reason": plan.reason})
                    if plan.forks_off:
                        await git_feedback.report_not_planned(unit, pull, plan.stack.slug, FORKS_OFF_STATUS)
                    continue
                run_id = await _propose(unit, hook, event, pull, plan)
                if run_id is None:
                    reason = f"commit {short_sha(event.head_sha)} was planned already"
                    answer["ignored"].append({"stack": plan.stack.slug, "reason": reason})
                else:
                    answer["runs"].append(run_id)
        elif event.action in (PullRequestAction.CLOSED, PullRequestAction.MERGED):
            word = "merged" if event.action is PullRequestAction.MERGED else "closed"
            # The answer names the runs it canceled (their status now).
            answer[RunStatus.CANCELED.value] = await cancel_queued(
                unit, pull.id, f"the pull request was {word}"
            )
        else:
            answer = {"ignored": "action", "action": event.raw_action}
        if not stacks and "runs" in answer:
            answer["reason"] = (
                f"no stack plans pull requests against branch '{event.base_branch}' of this repository"
            )
        row.result = answer
        await unit.session.flush()
        await prune_deliveries(unit.session, org.id)
        unit.publish_after_commit(org_git_channel(org.id), GitDeliveryLogged(org_id=org.id))
    return answer


async def _decide(ctx: Context, event: PullRequestEvent, stack: StackView, forks: ForkPolicy) -> _Plan:
    if event.from_fork and forks is ForkPolicy.OFF:
        return _Plan(stack, None, FORKS_OFF, forks_off=True)
    try:
        change = await asyncio.to_thread(
            fetch_pull_request,
            cache_of(ctx),
            stack.org_id,
            stack.repository,
            stack.credentials,
            base_branch=event.base_branch,
            head_ref=event.head_ref,
            head=event.head_sha,
            stack_path=stack.path,
        )
    except RemoteError as error:
        return _Plan(stack, None, f"cannot fetch: {error}")
    if not touches_stack(change.paths, stack.path, watch_globs(change.config_text)):
        return _Plan(stack, None, "no changed file is under the stack's path or its watch globs")
    return _Plan(stack, change, "")


async def _claim(unit: Unit, org_id: str, hook: Hook, event: PullRequestEvent) -> GitDelivery:
    row = GitDelivery(
        org_id=org_id,
        source=hook.source,
        delivery=hook.delivery,
        accepted_delivery=hook.delivery,
        event=hook.event[:100],
        repository=event.repository[:2000],
        ref=event.head_ref,
        head=event.head_sha,
        http_status=200,
        result={"runs": [], "ignored": []},
    )
    try:
        async with unit.session.begin_nested():
            unit.session.add(row)
            await unit.session.flush()
    except IntegrityError:
        raise Duplicate() from None
    return row


async def _pull_request_row(unit: Unit, org_id: str, hook: Hook, event: PullRequestEvent) -> PullRequest:
    session = unit.session
    query = (
        select(PullRequest)
        .where(
            PullRequest.org_id == org_id,
            PullRequest.repository == event.repository[:2000],
            PullRequest.number == event.number,
        )
        .with_for_update()
    )
    pull = await session.scalar(query)
    if pull is None:
        pull = PullRequest(
            id=new_id(), org_id=org_id, repository=event.repository[:2000], number=event.number
        )
        try:
            async with session.begin_nested():
                session.add(pull)
                _describe(pull, hook, event)
                await session.flush()
        except IntegrityError:
            # Another delivery of the same pull request wrote it first.
            pull = await session.scalar(query)
            assert pull is not None
    _describe(pull, hook, event)
    await session.flush()
    return pull


def _describe(pull: PullRequest, hook: Hook, event: PullRequestEvent) -> None:
    pull.url = event.url
    pull.title = event.title
    pull.author = event.author
    pull.head_sha = event.head_sha
    pull.base_branch = event.base_branch
    pull.from_fork = event.from_fork
    pull.dialect = hook.dialect.value
    pull.state = {
        PullRequestAction.CLOSED: "closed",
        PullRequestAction.MERGED: "merged",
    }.get(event.action, "open" if event.action is PullRequestAction.HEAD else pull.state or "open")
    pull.updated_at = utcnow()


async def _propose(
    unit: Unit, hook: Hook, event: PullRequestEvent, pull: PullRequest, plan: _Plan
) -> str | None:
    """Starts the stack's proposed run at the PR head, superseding the PR's queued ones; None
    when this head has a proposed run of the stack already (a GitLab update that kept the head)."""
    session = unit.session
    stack = await session.get(Stack, plan.stack.id)
    assert stack is not None and plan.change is not None
    existing = await session.scalar(
        select(Run.id).where(
            Run.stack_id == stack.id,
            Run.pull_request_id == pull.id,
            Run.trigger_commit == event.head_sha,
            Run.status != RunStatus.CANCELED,
        )
    )
    if existing is not None:
        return None
    await cancel_queued(unit, pull.id, f"superseded by {short_sha(event.head_sha)}", stack_id=stack.id)
    trigger = Trigger(
        kind=TriggerKind.PULL_REQUEST,
        by=f"git:{plan.change.author_email}",
        commit=event.head_sha,
        delivery=hook.delivery,
        pull_request=event.fields(),
        pull_request_id=pull.id,
    )
    run = await start_run(unit, None, stack, StartRun(type=RunType.PLAN), trigger=trigger)
    return run.id


async def cancel_queued(
    unit: Unit, pull_request_id: str, reason: str, *, stack_id: str | None = None
) -> list[str]:
    """Cancels the pull request's proposed runs that are still queued (of one stack, if given).
    Runs that have started are never touched."""
    query = select(Run).where(
        Run.pull_request_id == pull_request_id, Run.proposed, Run.status == RunStatus.QUEUED
    )
    if stack_id is not None:
        query = query.where(Run.stack_id == stack_id)
    queued = list(await unit.session.scalars(query.order_by(Run.number).with_for_update()))
    for run in queued:
        await change_status(unit, run, RunStatus.CANCELED, actor="git", error=reason)
    return [run.id for run in queued]
