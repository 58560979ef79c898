"""Events that must not be lost: written to the outbox in the transaction of the change they
announce, published after commit by the relay, which retries until the broker takes them.

Delivery is at least once: a process that dies between publishing and marking a row published
publishes it again at its next pass, so listeners treat events as "read again", never as data.
Events of different rows may arrive out of order when several processes relay at once.

One relay runs per control-plane process (app.py's lifespan). It is kicked right after a commit
that wrote outbox rows (its passes paced, see PACE) and also polls, for rows of other processes,
of the CLI, and for retries.
On PostgreSQL, relays of several processes claim disjoint rows (FOR UPDATE SKIP LOCKED); SQLite
has one process and one writer at a time. Published rows are kept for RETENTION (for the
notification and audit consumers), then deleted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from pydantic import ValidationError
from sqlalchemy import Row, Table, Update, bindparam, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume import retry
from firstlume.background import BackgroundService
from firstlume.db.append import append_rows
from firstlume.db.engine import Database
from firstlume.db.models import OutboxEvent
from firstlume.db.types import utcnow
from firstlume.protocol.events import Event, RunStatusChanged, event_from, scheduler_claims
from firstlume.pubsub import SCHEDULER_CHANNEL, PublishFailed, PubSub
from firstlume.services.context import Unit

log = logging.getLogger("firstlume.outbox")
_OUTBOX = cast(Table, OutboxEvent.__table__)

RETENTION = timedelta(days=7)
# Passes start at least this far apart (seconds). Each pass costs the process about half a
# millisecond (a connection, a transaction, the claim, a NOTIFY) whatever it publishes: a pass per
# commit took a sixth of the CPU of starting a run under load, where a pass every 20 ms
# publishes the events of several commits for the same cost. The delay is what a live view
# sees at most; this process's scheduler is woken directly (services/context.py).
PACE = 0.02


async def record(unit: Unit, event: Event, channels: list[str], *, notification: str | None = None) -> None:
    """Adds `event` to the outbox in the unit's transaction: it is published once, and only if,
    the unit commits."""
    await record_all(unit, [(event, channels)], notification=notification)


async def record_all(
    unit: Unit, events: Sequence[tuple[Event, list[str]]], *, notification: str | None = None
) -> None:
    """`record` for several events (each with its channels), in one INSERT: a claim of many runs
    records one each."""
    if not events:
        return
    now = utcnow()
    await append_rows(
        unit.session,
        _OUTBOX,
        [
            {
                "created_at": now,
                "kind": event.type,
                "notification": notification,
                "channels": channels,
                "payload": event.model_dump(mode="json", exclude_none=True),
                "attempts": 0,
                "available_at": now,
                "published_at": None,
                "last_error": None,
            }
            for event, channels in events
        ],
    )
    unit.wrote_outbox = True
    for event, channels in events:
        if SCHEDULER_CHANNEL in channels:
            unit.wakes_scheduler = True
            unit.scheduler_claims |= scheduler_claims(event)
            if isinstance(event, RunStatusChanged):
                unit.scheduler_changes.append((event.run_id, str(event.status)))


def _claim_statement(*, locking: bool) -> Update:
    """Marks the oldest due rows published and returns them: built once per relay, since it runs
    after every commit that wrote events. `locking` (PostgreSQL): rows another relay holds are
    skipped, not waited for. A Core statement on the table, run on the connection: the ORM's
    bulk UPDATE path (entity lookup, session synchronization options) cost more than the
    statement's own round trip, on every pass."""
    outbox = cast(Table, OutboxEvent.__table__)
    due = (
        select(outbox.c.id)
        .where(outbox.c.published_at.is_(None), outbox.c.available_at <= bindparam("now"))
        .order_by(outbox.c.id)
        .limit(bindparam("batch"))
    )
    if locking:
        due = due.with_for_update(skip_locked=True)
    return (
        update(outbox)
        .where(outbox.c.id.in_(due.scalar_subquery()))
        .values(published_at=bindparam("now", type_=outbox.c.published_at.type))
        .returning(outbox.c.id, outbox.c.kind, outbox.c.channels, outbox.c.payload, outbox.c.attempts)
    )


class OutboxRelay(BackgroundService):
    """Publishes the outbox's due events at every pass (background.py); a stop publishes what
    the last requests wrote before it returns."""

    def __init__(
        self,
        db: Database,
        pubsub: PubSub,
        *,
        interval: float = 1.0,
        pace: float = PACE,
        batch: int = 200,
        cleanup_interval: float = 600.0,
        stop_grace: float = 5.0,
    ) -> None:
        super().__init__("outbox-relay", interval=interval, log=log, stop_grace=stop_grace)
        self.db = db
        self.pubsub = pubsub
        self.pace = pace
        self.batch = batch
        self.cleanup_interval = cleanup_interval
        self._claim = _claim_statement(locking=not db.is_sqlite)
        self._passed_at = 0.0
        self._next_cleanup: float | None = None

    async def run_pass(self) -> None:
        loop = asyncio.get_running_loop()
        self._passed_at = loop.time()
        await self.publish_pending()
        if not self.stopping and (self._next_cleanup is None or loop.time() >= self._next_cleanup):
            await self.delete_old()
            self._next_cleanup = loop.time() + self.cleanup_interval

    async def pause(self, seconds: float) -> None:
        await super().pause(seconds)
        # Kicked again soon after a pass (a burst of commits): the next pass waits out the
        # pace, then publishes what all of them wrote at once. An event after a quiet spell
        # goes out at once.
        early = self._passed_at + self.pace - asyncio.get_running_loop().time()
        if early > 0 and not self.stopping:
            await asyncio.sleep(early)

    async def publish_pending(self) -> int:
        """Publishes every due event, oldest first, in batches; returns how many were published."""
        total = 0
        while True:
            published, full = await self._pass()
            total += published
            if not full:
                return total

    async def _pass(self) -> tuple[int, bool]:
        """One batch: the due rows are marked published and returned by one UPDATE (which also
        locks them against other relays), their events are sent in one round trip, and the
        transaction commits. If sending fails, the same transaction puts the rows back, due
        again after a backoff."""
        async with self.db.transaction() as session:
            now = utcnow()
            connection = await session.connection()
            claimed = await connection.execute(self._claim, {"now": now, "batch": self.batch})
            rows = sorted(claimed.all(), key=lambda row: row.id)  # RETURNING keeps no order
            messages: list[tuple[str, Event]] = []
            for row in rows:
                try:
                    event = event_from(row.payload)
                except ValidationError:
                    # Written by a newer or broken version: publishing it can never work, and
                    # retrying it forever would hold back every later event.
                    log.error("outbox event %s is not a valid %s event; skipped", row.id, row.kind)
                    continue
                messages.extend((channel, event) for channel in row.channels)
            try:
                if messages:
                    await self.pubsub.publish_many(messages)
            except PublishFailed as error:
                await self._retry_later(session, rows, str(error), now)
                log.warning("outbox events wait for the broker: %s", error)
                return 0, False
        return len(rows), len(rows) == self.batch

    async def _retry_later(
        self, session: AsyncSession, rows: list[Row[Any]], error: str, now: datetime
    ) -> None:
        # One delay for all, the oldest row's, so that the later rows do not overtake it.
        delay = retry.EVENT_PUBLISH.delay(rows[0].attempts + 1)
        ids = [row.id for row in rows]
        await session.execute(
            update(OutboxEvent)
            .where(OutboxEvent.id.in_(ids))
            .values(
                published_at=None,
                attempts=OutboxEvent.attempts + 1,
                last_error=error[:1000],
                available_at=now + timedelta(seconds=delay),
            )
            .execution_options(synchronize_session=False)
        )

    async def delete_old(self) -> None:
        async with self.db.transaction() as session:
            await session.execute(delete(OutboxEvent).where(OutboxEvent.published_at < utcnow() - RETENTION))
