"""The organizations' active runs, live, read once per organization for all its viewers.

Every open page shows its organization's active runs (the header's panel), so one organization
may have thousands of live viewers. Each process keeps one feed per organization that someone
there follows: it listens to the organization's channel, reads the runs an event names once, and
hands the new list to every follower of the process. The list is a state, not a history: a
follower that was busy while the list moved twice is handed the newest one, with every run that
changed meanwhile named. With no event for SAFETY_POLL_SECONDS (or after the broker lost some),
the feed reads the whole list again, once for all of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from firstlume.db.engine import Database
from firstlume.domain.runs import ACTIVE
from firstlume.protocol.events import Closed, Event, RunStatusChanged
from firstlume.pubsub import PubSub, org_runs_channel
from firstlume.services.logs import SAFETY_POLL_SECONDS
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads.runs import RunRecord

log = logging.getLogger("firstlume.active_runs")

ACTIVE_VALUES = {s.value for s in ACTIVE}
# How many of its latest changes a feed remembers: a follower further behind than this reloads
# everything it shows instead of only the runs that changed.
KEPT_CHANGES = 64


class FeedSources(Protocol):
    db: Database
    pubsub: PubSub


@dataclass(frozen=True)
class ActiveRuns:
    """The organization's active runs, oldest first, and the ids of the runs that changed since
    the follower's previous list (None: its first list, or it fell too far behind to tell)."""

    runs: list[RunRecord]
    changed: frozenset[str] | None


class _OrgFeed:
    def __init__(self, feeds: ActiveRunsFeeds, org_id: str) -> None:
        self.feeds = feeds
        self.org_id = org_id
        self.runs: dict[str, RunRecord] = {}
        self.version = 0
        self.changes: deque[tuple[int, frozenset[str]]] = deque(maxlen=KEPT_CHANGES)
        self.followers: set[asyncio.Event] = set()
        self.ready = asyncio.Event()
        self.ended = False
        self.failure: BaseException | None = None
        self.task = asyncio.create_task(self._pump(), name=f"active runs {org_id}")

    def ordered(self) -> list[RunRecord]:
        return sorted(self.runs.values(), key=lambda r: (r.created_at, r.number))

    def changed_since(self, version: int | None) -> frozenset[str] | None:
        if version is None or not self.changes or self.changes[0][0] > version + 1:
            return None
        return frozenset().union(*(ids for v, ids in self.changes if v > version))

    async def _pump(self) -> None:
        try:
            async with self.feeds.ctx.pubsub.subscribe(org_runs_channel(self.org_id)) as events:
                self.runs = await self._read_all()
                self.version = 1
                self.ready.set()
                while True:
                    event = await events.next(SAFETY_POLL_SECONDS)
                    batch: list[Event] = [event, *events.pending()] if event is not None else []
                    if any(isinstance(e, Closed) for e in batch):
                        return
                    changed = await self._apply(batch)
                    if changed:
                        self.version += 1
                        self.changes.append((self.version, changed))
                        self._wake()
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            log.exception("the active runs of organization %s could not be followed", self.org_id)
            self.failure = error
        finally:
            self.ended = True
            self.ready.set()
            self._wake()
            self.feeds.drop(self)

    async def _apply(self, batch: list[Event]) -> frozenset[str]:
        """Brings the list up to date; the ids of the runs that changed in it."""
        if not batch:
            # No event for a while, or some were lost (pubsub.Subscription.next: None after a
            # Resync): the database itself says.
            fresh = await self._read_all()
            if _fingerprint(fresh) == _fingerprint(self.runs):
                return frozenset()
            changed = frozenset(fresh) | frozenset(self.runs)
            self.runs = fresh
            return changed
        ids = sorted({e.run_id for e in batch if isinstance(e, RunStatusChanged)})
        if not ids:
            return frozenset()
        async with self.feeds.ctx.db.read() as session:
            rows = await run_reads.runs_by_id(session, ids)
        for run_id, row in zip(ids, rows, strict=True):
            if row is not None and row.org_id == self.org_id and row.status in ACTIVE_VALUES:
                self.runs[run_id] = row
            else:
                self.runs.pop(run_id, None)
        return frozenset(ids)

    async def _read_all(self) -> dict[str, RunRecord]:
        async with self.feeds.ctx.db.read() as session:
            [rows] = await run_reads.active_runs(session, [self.org_id])
        return {r.id: r for r in rows}

    def _wake(self) -> None:
        for wake in self.followers:
            wake.set()


def _fingerprint(rows: dict[str, RunRecord]) -> tuple[tuple[str, str, object], ...]:
    return tuple(sorted((r.id, r.status, r.updated_at) for r in rows.values()))


class ActiveRunsFeeds:
    """One process's feeds, one per organization with followers here."""

    def __init__(self, ctx: FeedSources) -> None:
        self.ctx = ctx
        self._feeds: dict[str, _OrgFeed] = {}

    def drop(self, feed: _OrgFeed) -> None:
        if self._feeds.get(feed.org_id) is feed:
            del self._feeds[feed.org_id]
        if not feed.task.done() and asyncio.current_task() is not feed.task:
            feed.task.cancel()

    async def follow(self, org_id: str) -> AsyncIterator[ActiveRuns]:
        """The organization's active runs now, then after each change, until the process stops
        publishing (it shuts down)."""
        feed = self._feeds.get(org_id)
        if feed is None or feed.ended:
            feed = self._feeds[org_id] = _OrgFeed(self, org_id)
        wake = asyncio.Event()
        feed.followers.add(wake)
        try:
            await feed.ready.wait()
            seen: int | None = None
            while True:
                if feed.failure is not None:
                    raise feed.failure
                if feed.version != seen and feed.version > 0:
                    changed = feed.changed_since(seen)
                    seen = feed.version
                    yield ActiveRuns(feed.ordered(), changed)
                    continue
                if feed.ended:
                    return
                wake.clear()
                await wake.wait()
        finally:
            feed.followers.discard(wake)
            if not feed.followers:
                self.drop(feed)
