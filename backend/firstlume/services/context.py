"""What every use case needs, and the unit of work that publishes events after commit."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.db.engine import Database
from firstlume.domain.claims import Claim
from firstlume.launchers.base import PhaseLaunch
from firstlume.protocol.events import Event
from firstlume.pubsub import PubSub
from firstlume.services.access.token_watch import TokenWatch
from firstlume.services.active_runs import ActiveRunsFeeds
from firstlume.services.logs import LogTails
from firstlume.services.ports import Kickable, Notifier, SchedulerPort
from firstlume.services.storage import StorageWatch
from firstlume.settings import Settings

log = logging.getLogger("firstlume.events")


@dataclass
class Unit:
    session: AsyncSession
    _events: list[tuple[str, Event]] = field(default_factory=list)
    # Whether it wrote outbox rows (services/outbox.py), which the relay then publishes.
    wrote_outbox: bool = False
    # The position in its stack's queue (1 = starts next) of each run this unit queued, counted
    # when it was queued (transitions.py): the answer to starting a run reads it from here.
    queue_positions: dict[str, int] = field(default_factory=dict)
    # Whether it wrote notification deliveries, which a sender then posts.
    wrote_notifications: bool = False
    # Whether it wrote dependency triggers (services/dependencies/outbox.py), which a
    # DependencyTriggers service then carries out.
    wrote_dependency_triggers: bool = False
    # Whether it wrote Git host feedback (commit statuses, PR comments), which a sender then posts.
    wrote_git_feedback: bool = False
    # Whether it recorded an event for the schedulers (a run became startable or ended), and
    # which kinds of phase that can make startable (domain/claims.py).
    wakes_scheduler: bool = False
    scheduler_claims: set[Claim] = field(default_factory=set)
    # The status changes behind that wake, as (run id, status): this process's scheduler, woken
    # for them at commit, need not pass again when their events come back through the relay.
    scheduler_changes: list[tuple[str, str]] = field(default_factory=list)
    # Phases it claimed outside the scheduler's passes, which this process's scheduler launches
    # once it commits (services/dispatch.py hand_over_apply).
    launches: list[PhaseLaunch] = field(default_factory=list)

    def publish_after_commit(self, channel: str, event: Event) -> None:
        """A best-effort wake-up for live views, sent once the transaction has committed. If the
        broker is down then, it is lost (views also poll); events that must not be lost go
        through the outbox instead (services/outbox.py). An event already waiting is not added
        again: several reports of one request (POST /reports) would wake a view once each."""
        entry = (channel, event)
        if entry not in self._events:
            self._events.append(entry)


@dataclass
class Context:
    """What every use case needs: settings, the database, the key ring, the broker, and the
    services a committed unit tells of its changes, given when the app builds the context."""

    settings: Settings
    db: Database
    keyring: KeyRing
    pubsub: PubSub
    # The outbox relay (services/outbox.py); without one (the CLI), outbox rows wait for the
    # next relay to run.
    relay: Kickable | None = None
    # This process's notification sender (services/notifications/sender.py), when it has one.
    notifier: Notifier | None = None
    # This process's Git feedback sender (services/git/feedback.py), when it has one.
    git_feedback: Kickable | None = None
    # This process's scheduler, when it runs one.
    scheduler: SchedulerPort | None = None
    # This process's starter of dependents' runs (services/dependencies/triggers.py), when it runs one.
    dependency_triggers: Kickable | None = None
    # The storage failures this process met, for /readyz: one watch for every context the app
    # builds from the first (dataclasses.replace keeps it).
    storage: StorageWatch = field(default_factory=StorageWatch)
    # This process's live log readers, one tail per run (services/logs.py), its feeds of
    # active runs, one per organization (services/active_runs.py), and its watch over the
    # tokens of open subscriptions (one query for all).
    log_tails: LogTails = field(init=False)
    active_runs: ActiveRunsFeeds = field(init=False)
    token_watch: TokenWatch = field(init=False)

    def __post_init__(self) -> None:
        self.log_tails = LogTails(self)
        self.active_runs = ActiveRunsFeeds(self)
        self.token_watch = TokenWatch(self)

    @asynccontextmanager
    async def unit(self) -> AsyncIterator[Unit]:
        """A transaction; events recorded in it are published only once it has committed, so a
        subscriber never hears of a change it cannot read yet. Publishing never fails the unit:
        its change is saved by then."""
        unit = Unit(session=None)  # type: ignore[arg-type]
        async with self.db.transaction() as session:
            unit.session = session
            yield unit
        if unit.wrote_outbox and self.relay is not None:
            self.relay.kick()
        if self.scheduler is not None:
            if unit.wakes_scheduler:
                # This process's scheduler starts its pass now, not once the event has gone
                # through the relay and the broker and come back (other replicas still hear it
                # that way): every run's start waits for that pass.
                self.scheduler.wake(frozenset(unit.scheduler_claims), tuple(unit.scheduler_changes))
            if unit.launches:
                self.scheduler.launch_claimed(unit.launches)
        if unit.wrote_notifications and self.notifier is not None:
            self.notifier.kick()
        if unit.wrote_dependency_triggers and self.dependency_triggers is not None:
            self.dependency_triggers.kick()
        if unit.wrote_git_feedback and self.git_feedback is not None:
            self.git_feedback.kick()
        if unit._events:
            # All in one round trip on PostgreSQL: the request's answer waits for them (a phase's
            # result publishes its log, its resources and its run).
            try:
                await self.pubsub.publish_many(unit._events)
            except Exception as error:
                kinds = ", ".join(sorted({event.type for _, event in unit._events}))
                log.warning("%d events (%s) were not published: %s", len(unit._events), kinds, error)


@dataclass(frozen=True)
class Actor:
    """Who is calling: a user authenticated by an API token; in an organization's request, also
    their role and groups there."""

    user_id: str
    email: str
    token_id: str | None = None
    token_last_used_at: datetime | None = None
    role: str | None = None
    groups: tuple[str, ...] = ()
