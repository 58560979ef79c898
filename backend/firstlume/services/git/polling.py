"""Polling branch heads over the Git protocol, for any server and for missed webhooks.

Once per interval across replicas: the replica that moves the lease's `next_at` forward polls
(a compare-and-set on one row). Even two replicas polling at once start one run per commit,
since each stack's last seen head moves by compare-and-set (pushes.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from datetime import timedelta

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from firstlume.db.models import Stack
from firstlume.db.models_git import GitPollLease
from firstlume.db.types import utcnow
from firstlume.domain.git import StackTrigger, normalize_repository
from firstlume.services.context import Context
from firstlume.services.git.pushes import Outcome, Sighting, StackView, handle, view_of
from firstlume.services.git.remote import GitCache, RemoteError, branch_heads

log = logging.getLogger("firstlume.git")

LEASE = "git-poll"


def cache_of(ctx: Context) -> GitCache:
    return GitCache(ctx.settings.data_dir / "git-cache")


async def claim_poll(ctx: Context, interval: float, holder: str) -> bool:
    """Whether this replica polls now: it moved the lease forward by one interval."""
    now = utcnow()
    async with ctx.unit() as unit:
        moved = await unit.session.execute(
            update(GitPollLease)
            .where(GitPollLease.name == LEASE, GitPollLease.next_at <= now)
            .values(next_at=now + timedelta(seconds=interval), holder=holder)
            .execution_options(synchronize_session=False)
        )
        if moved.rowcount == 1:  # type: ignore[attr-defined]
            return True
    try:
        async with ctx.unit() as unit:
            if await unit.session.get(GitPollLease, LEASE) is not None:
                return False
            unit.session.add(
                GitPollLease(name=LEASE, next_at=now + timedelta(seconds=interval), holder=holder)
            )
    except IntegrityError:  # another replica created it first
        return False
    return True


async def triggered_stacks(ctx: Context) -> list[StackView]:
    async with ctx.db.read() as session:
        stacks = await session.scalars(
            select(Stack).where(Stack.trigger != StackTrigger.MANUAL, Stack.deleted_at.is_(None))
        )
        return [view_of(ctx, stack) for stack in stacks]


async def poll_once(ctx: Context, cache: GitCache) -> list[Outcome]:
    """Asks each distinct repository of the triggered stacks for its branch heads (ls-remote, no
    clone) and hands every branch whose head moved to pushes.handle."""
    groups: dict[tuple[str, str], list[StackView]] = defaultdict(list)
    for stack in await triggered_stacks(ctx):
        groups[(stack.org_id, normalize_repository(stack.repository))].append(stack)
    outcomes = []
    for (org_id, _), stacks in groups.items():
        # The first stack with credentials asks for the repository (all follow the same one).
        asker = next(
            (s for s in stacks if s.credentials.https_token or s.credentials.ssh_private_key), stacks[0]
        )
        try:
            heads = await asyncio.to_thread(branch_heads, cache, org_id, asker.repository, asker.credentials)
        except RemoteError as error:
            log.warning("polling failed: %s", error)
            continue
        for branch in sorted({s.branch for s in stacks}):
            head = heads.get(branch)
            moved = [s for s in stacks if s.branch == branch and head is not None and s.seen != head]
            if head is None or not moved:
                continue
            sighting = Sighting(
                org_id=org_id, repository=asker.repository, branch=branch, head=head, source="poll"
            )
            outcomes.append(await handle(ctx, cache, sighting, moved))
    return outcomes


async def current_head(ctx: Context, cache: GitCache, stack: StackView) -> str | None:
    """The branch's head now, for the baseline when a stack's trigger is switched on; None when
    the server cannot be asked (the first head seen later becomes the baseline)."""
    try:
        heads = await asyncio.to_thread(
            branch_heads, cache, stack.org_id, stack.repository, stack.credentials
        )
    except RemoteError as error:
        log.warning("no baseline for stack %s: %s", stack.slug, error)
        return None
    return heads.get(stack.branch)


async def set_baseline(ctx: Context, stack_id: str) -> str | None:
    """Records the branch's current head as a triggered stack's baseline, unless one is set."""
    async with ctx.db.read() as session:
        stack = await session.get(Stack, stack_id)
        if stack is None or stack.trigger == StackTrigger.MANUAL or stack.git_seen_commit is not None:
            return None
        view = view_of(ctx, stack)
    head = await current_head(ctx, cache_of(ctx), view)
    if head is None:
        return None
    async with ctx.unit() as unit:
        await unit.session.execute(
            update(Stack)
            .where(
                Stack.id == stack_id, Stack.git_seen_commit.is_(None), Stack.trigger != StackTrigger.MANUAL
            )
            .values(git_seen_commit=head)
            .execution_options(synchronize_session=False)
        )
    return head
