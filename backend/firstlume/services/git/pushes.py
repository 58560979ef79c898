"""What a new head of a branch starts: the one path that webhooks and polling both feed.

For each stack following the branch: fetch the new head, diff it against the last head seen,
and if the change touches the stack (its path, or a `watch:` glob of its config.yaml), start
one run of the stack's trigger type. The last seen head moves by compare-and-set in the same
transaction as the run, so two replicas (or a webhook and a poll) that see the same push start
one run between them.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import yaml
from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume import retry
from firstlume.db.models import Run, Stack
from firstlume.db.models_git import GitDelivery
from firstlume.domain.git import StackTrigger, normalize_repository, short_sha, touches_stack
from firstlume.domain.runs import RunStatus, TriggerKind
from firstlume.protocol.events import GitDeliveryLogged
from firstlume.pubsub import org_git_channel
from firstlume.services.commands import StartRun
from firstlume.services.context import Context, Unit
from firstlume.services.git.remote import Change, Credentials, GitCache, RemoteError, fetch_change
from firstlume.services.reads.runs import RunRecord
from firstlume.services.runs import Trigger, start_run
from firstlume.services.transitions import change_status

log = logging.getLogger("firstlume.git")

# Delivery log entries kept per organization (the API shows the newest 100).
KEPT_DELIVERIES = 1000


@dataclass(frozen=True)
class Sighting:
    """A branch head reported by a webhook or found by a poll."""

    org_id: str
    repository: str
    branch: str
    head: str
    source: str  # "poll" or "webhook:<dialect>"
    delivery: str | None = None  # the host's delivery id
    event: str | None = None
    # The webhook's previous head: the diff's base when the stack has no baseline yet.
    before: str | None = None


@dataclass
class Outcome:
    runs: list[str] = field(default_factory=list)
    ignored: list[dict[str, str]] = field(default_factory=list)
    duplicate: bool = False
    # Whether any stack's last seen head moved on from its baseline (a poll logs only those).
    advanced: bool = False

    def result(self) -> dict[str, Any]:
        return {"runs": self.runs, "ignored": self.ignored}


@dataclass(frozen=True)
class StackView:
    """What deciding needs of a stack, read once (credentials unsealed, never logged)."""

    id: str
    slug: str
    org_id: str
    repository: str
    branch: str
    path: str
    trigger: StackTrigger
    seen: str | None
    credentials: Credentials


@dataclass(frozen=True)
class _Decision:
    stack: StackView
    run: bool
    reason: str
    change: Change | None = None
    # Whether the stack's last seen head becomes this head (not for a manual stack, a head
    # already seen, or an older commit arriving late).
    move: bool = True
    # Whether this head is the stack's first, its baseline: no commit came after one seen.
    baseline: bool = False


class _Duplicate(Exception):
    pass


def view_of(ctx: Context, stack: Stack) -> StackView:
    context = f"stack-git:{stack.id}"
    keyring = ctx.keyring
    return StackView(
        id=stack.id,
        slug=stack.slug,
        org_id=stack.org_id,
        repository=stack.repository,
        branch=stack.branch,
        path=stack.path,
        trigger=StackTrigger(stack.trigger),
        seen=stack.git_seen_commit,
        credentials=Credentials(
            https_token=keyring.decrypt_text(stack.git_https_token_sealed, context)
            if stack.git_https_token_sealed
            else None,
            ssh_private_key=keyring.decrypt_text(stack.git_ssh_key_sealed, context)
            if stack.git_ssh_key_sealed
            else None,
        ),
    )


def follows(stack: Stack, repository_urls: list[str], branch: str) -> bool:
    wanted = {normalize_repository(url) for url in repository_urls if url}
    return stack.branch == branch and normalize_repository(stack.repository) in wanted


def watch_globs(config_text: str | None) -> list[str]:
    """config.yaml's `watch:` list; a file the executor would refuse widens nothing here."""
    if not config_text:
        return []
    try:
        document = yaml.safe_load(config_text)
    except yaml.YAMLError:
        return []
    watch = document.get("watch") if isinstance(document, dict) else None
    if not isinstance(watch, list):
        return []
    return [glob for glob in watch if isinstance(glob, str)]


async def _decide(cache: GitCache, sighting: Sighting, stack: StackView) -> _Decision:
    if stack.trigger is StackTrigger.MANUAL:
        return _Decision(stack, False, "the stack's trigger is manual", move=False)
    if stack.seen == sighting.head:
        return _Decision(stack, False, f"commit {short_sha(sighting.head)} was seen already", move=False)
    base = stack.seen or sighting.before
    if base is None:
        return _Decision(
            stack, False, f"first head seen, {short_sha(sighting.head)}: it is the baseline", baseline=True
        )
    try:
        change = await asyncio.to_thread(
            fetch_change,
            cache,
            stack.org_id,
            stack.repository,
            stack.credentials,
            branch=stack.branch,
            old=base,
            new=sighting.head,
            stack_path=stack.path,
        )
    except RemoteError as error:
        raise _Unreachable(str(error)) from None
    if change.behind:
        reason = f"commit {short_sha(sighting.head)} is older than the last one seen"
        return _Decision(stack, False, reason, move=False)
    if not touches_stack(change.paths, stack.path, watch_globs(change.config_text)):
        return _Decision(stack, False, "no changed file is under the stack's path or its watch globs", change)
    return _Decision(stack, True, "", change)


class _Unreachable(Exception):
    """The repository could not be fetched: nothing moves, the next poll tries again."""


async def handle(ctx: Context, cache: GitCache, sighting: Sighting, stacks: list[StackView]) -> Outcome:
    """Starts the runs `sighting` calls for in `stacks` (those following its branch), records the
    delivery (a webhook's always; a poll's when a head moved), and says what it did."""
    outcome = Outcome()
    pending = list(stacks)
    row_id: int | None = None
    try:
        async for attempt in retry.HEAD_MOVED.retrying(_HeadsMoved):
            with attempt:
                decisions: list[_Decision] = []
                for stack in pending:
                    try:
                        decisions.append(await _decide(cache, sighting, stack))
                    except _Unreachable as error:
                        outcome.ignored.append({"stack": stack.slug, "reason": f"cannot fetch: {error}"})
                first = attempt.retry_state.attempt_number == 1
                lost, row_id = await _apply(ctx, sighting, decisions, outcome, row_id, claim=first)
                # Another delivery moved these stacks' heads between our reading and our write:
                # read them again and decide against their new heads.
                pending = await _reload(ctx, lost) if lost else []
                if pending:
                    raise _HeadsMoved
    except _Duplicate:
        return Outcome(duplicate=True)
    except _HeadsMoved:
        pass  # still moving after the last try: the next delivery or poll sees where they went
    return outcome


class _HeadsMoved(Exception):
    """Some stacks' heads moved under our compare-and-set: decided again (retry.HEAD_MOVED)."""


async def _reload(ctx: Context, stack_ids: list[str]) -> list[StackView]:
    async with ctx.db.read() as session:
        stacks = list(await session.scalars(select(Stack).where(Stack.id.in_(stack_ids))))
    return [view_of(ctx, stack) for stack in stacks]


async def _apply(
    ctx: Context,
    sighting: Sighting,
    decisions: list[_Decision],
    outcome: Outcome,
    row_id: int | None,
    *,
    claim: bool,
) -> tuple[list[str], int | None]:
    """One transaction: claim the delivery id, move each stack's head, start and supersede runs,
    and log the delivery with its result. Returns the stacks whose head another process moved
    first, and the delivery row."""
    lost: list[str] = []
    async with ctx.unit() as unit:
        session = unit.session
        row = await session.get(GitDelivery, row_id) if row_id is not None else None
        if claim and sighting.delivery is not None:
            row = await _claim_delivery(unit, sighting)
        for decision in decisions:
            stack = decision.stack
            if not decision.move:
                outcome.ignored.append({"stack": stack.slug, "reason": decision.reason})
                continue
            seen = Stack.git_seen_commit
            moved = await session.execute(
                update(Stack)
                .where(
                    Stack.id == stack.id,
                    seen.is_(None) if stack.seen is None else seen == stack.seen,
                    Stack.trigger != StackTrigger.MANUAL,
                )
                .values(git_seen_commit=sighting.head)
                .execution_options(synchronize_session=False)
            )
            if moved.rowcount != 1:  # type: ignore[attr-defined]
                lost.append(stack.id)
                continue
            # A poll that only takes a first head as a baseline logs nothing: that is what switching
            # the trigger on does (polling.set_baseline), and a poll may get there first.
            outcome.advanced = outcome.advanced or not decision.baseline
            if not decision.run:
                outcome.ignored.append({"stack": stack.slug, "reason": decision.reason})
                continue
            run = await _start_push_run(unit, sighting, stack, decision.change)
            outcome.runs.append(run.id)
        if row is None and outcome.advanced:
            row = _delivery_row(sighting, accepted=False)
            session.add(row)
            await prune_deliveries(session, sighting.org_id)
        if row is not None:
            row.result = outcome.result()
            await session.flush()
            unit.publish_after_commit(
                org_git_channel(sighting.org_id), GitDeliveryLogged(org_id=sighting.org_id)
            )
    return lost, row.id if row is not None else None


def _delivery_row(sighting: Sighting, *, accepted: bool) -> GitDelivery:
    return GitDelivery(
        org_id=sighting.org_id,
        source=sighting.source,
        delivery=sighting.delivery,
        accepted_delivery=sighting.delivery if accepted else None,
        event=sighting.event,
        repository=sighting.repository,
        ref=f"refs/heads/{sighting.branch}",
        head=sighting.head,
        http_status=200,
        result={"runs": [], "ignored": []},
    )


async def _claim_delivery(unit: Unit, sighting: Sighting) -> GitDelivery:
    """Takes the host's delivery id for this organization; a second taker is a replay."""
    row = _delivery_row(sighting, accepted=True)
    try:
        async with unit.session.begin_nested():
            unit.session.add(row)
            await unit.session.flush()
    except IntegrityError:
        raise _Duplicate() from None
    await prune_deliveries(unit.session, sighting.org_id)
    return row


async def prune_deliveries(session: AsyncSession, org_id: str) -> None:
    """Keeps the organization's newest KEPT_DELIVERIES entries: refused deliveries cost an
    attacker nothing, and must not fill the database. (Delivery ids older than that can be
    replayed; hosts redeliver within days, long before.)"""
    oldest_kept = await session.scalar(
        select(GitDelivery.id)
        .where(GitDelivery.org_id == org_id)
        .order_by(GitDelivery.id.desc())
        .offset(KEPT_DELIVERIES - 1)
        .limit(1)
    )
    if oldest_kept is not None:
        await session.execute(
            delete(GitDelivery)
            .where(GitDelivery.org_id == org_id, GitDelivery.id < oldest_kept)
            .execution_options(synchronize_session=False)
        )


async def delivery_seen(ctx: Context, org_id: str, delivery: str) -> bool:
    async with ctx.db.read() as session:
        found = await session.scalar(
            select(GitDelivery.id).where(
                GitDelivery.org_id == org_id, GitDelivery.accepted_delivery == delivery
            )
        )
    return found is not None


async def _start_push_run(
    unit: Unit, sighting: Sighting, view: StackView, change: Change | None
) -> RunRecord:
    session = unit.session
    stack = await session.get(Stack, view.id)
    assert stack is not None
    await supersede_queued(unit, stack.id, sighting.head)
    run_type = view.trigger.run_type
    assert run_type is not None
    email = change.author_email if change else "unknown"
    trigger = Trigger(
        kind=TriggerKind.PUSH, by=f"git:{email}", commit=sighting.head, delivery=sighting.delivery
    )
    return await start_run(unit, None, stack, StartRun(type=run_type), trigger=trigger)


async def supersede_queued(unit: Unit, stack_id: str, head: str) -> list[str]:
    """Cancels the stack's push runs that are still queued: a newer commit replaces them. Runs
    that have started are never touched."""
    queued = list(
        await unit.session.scalars(
            select(Run)
            .where(
                Run.stack_id == stack_id,
                Run.status == RunStatus.QUEUED,
                Run.trigger_kind == TriggerKind.PUSH,
            )
            .with_for_update()
        )
    )
    for run in queued:
        await change_status(
            unit, run, RunStatus.CANCELED, actor="git", error=f"superseded by {short_sha(head)}"
        )
    return [run.id for run in queued]
