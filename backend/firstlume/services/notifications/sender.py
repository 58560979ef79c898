"""Posts deliveries after commit, from any replica, at least once, with retries for 24 hours.

A sender claims a due delivery by a compare-and-set of its lease (`leased_until`), commits, and
only then posts it: no transaction (and on SQLite no write lock) is held while a receiver takes
its time. A process that dies mid-post leaves the lease to expire, and the delivery is posted
again by whichever sender comes next, with the same delivery id: receivers deduplicate by
X-Firstlume-Delivery. Each attempt is recorded (time, status code, duration, error).

A non-2xx answer (a redirect too: none is ever followed, so a webhook cannot be bounced to
another host), a timeout or a refused address is retried with exponential backoff and jitter:
first after about FIRSTLUME_NOTIFICATION_FIRST_RETRY seconds, doubling up to an hour between
attempts, until 24 hours after the event; then the delivery is given up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from sqlalchemy import delete, or_, select, update

from firstlume import retry
from firstlume.background import BackgroundService
from firstlume.db.engine import Database
from firstlume.db.models import Organization
from firstlume.db.models_drift import NotificationAttempt, NotificationDelivery, NotificationDestination
from firstlume.db.types import utcnow
from firstlume.services.context import Context
from firstlume.services.notifications import payloads
from firstlume.services.notifications.addresses import PrivateAddress, check_webhook_url
from firstlume.services.notifications.destinations import reveal_secret
from firstlume.services.tls import public_tls_context

log = logging.getLogger("firstlume.notifications")

TIMEOUT_SECONDS = 10.0
GIVE_UP_AFTER = timedelta(hours=24)
# Finished deliveries (and their attempts) are kept this long for the history, then deleted.
RETENTION = timedelta(days=30)
CLEANUP_SECONDS = 3600.0
BATCH = 50
CONCURRENCY = 8
USER_AGENT = "Firstlume-Notifications/1"


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    duration_ms: int
    error: str | None

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class NotificationSender(BackgroundService):
    def __init__(
        self,
        ctx: Context,
        *,
        db: Database | None = None,
        interval: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__("notification-sender", interval=interval, log=log)
        self.ctx = ctx
        # Its own connections, like the outbox relay's: polling never takes a request's.
        self.db = db or ctx.db
        self.lease = timedelta(seconds=ctx.settings.notification_lease)
        self.retries = retry.notification_delivery(ctx.settings.notification_first_retry)
        self._limit = asyncio.Semaphore(CONCURRENCY)
        self._next_cleanup: float | None = None
        self._http = httpx.AsyncClient(
            verify=public_tls_context(),
            timeout=httpx.Timeout(TIMEOUT_SECONDS),
            follow_redirects=False,
            trust_env=False,
            transport=transport,
            headers={"User-Agent": USER_AGENT},
        )

    async def stop(self) -> None:
        await super().stop()
        await self._http.aclose()

    async def run_pass(self) -> None:
        while await self.send_due():
            pass
        loop = asyncio.get_running_loop()
        if self._next_cleanup is None or loop.time() >= self._next_cleanup:
            await self.delete_old(utcnow())
            self._next_cleanup = loop.time() + CLEANUP_SECONDS

    async def send_due(self) -> int:
        """Claims and posts the deliveries due now; returns how many were attempted."""
        claimed = await self._claim(utcnow())
        await asyncio.gather(*(self._attempt(delivery_id) for delivery_id in claimed))
        return len(claimed)

    async def _claim(self, now: datetime) -> list[str]:
        # Read first, without a write lock (most polls find nothing), then claim what was found.
        async with self.db.read() as session:
            candidates = list(
                await session.scalars(
                    select(NotificationDelivery.id)
                    .where(
                        NotificationDelivery.delivered_at.is_(None),
                        NotificationDelivery.given_up_at.is_(None),
                        NotificationDelivery.next_attempt_at <= now,
                        _lease_free(now),
                    )
                    .order_by(NotificationDelivery.next_attempt_at, NotificationDelivery.id)
                    .limit(BATCH)
                )
            )
        if not candidates:
            return []
        claimed = []
        async with self.db.transaction() as session:
            for delivery_id in candidates:
                # Compare-and-set: of two replicas that read the same row, one takes it.
                result = await session.execute(
                    update(NotificationDelivery)
                    .where(
                        NotificationDelivery.id == delivery_id,
                        NotificationDelivery.delivered_at.is_(None),
                        NotificationDelivery.given_up_at.is_(None),
                        _lease_free(now),
                    )
                    .values(leased_until=now + self.lease)
                    .execution_options(synchronize_session=False)
                )
                if result.rowcount == 1:  # type: ignore[attr-defined]
                    claimed.append(delivery_id)
        return claimed

    async def delete_old(self, now: datetime) -> int:
        """Deletes finished deliveries older than RETENTION; returns how many."""
        async with self.db.transaction() as session:
            result = await session.execute(
                delete(NotificationDelivery).where(
                    NotificationDelivery.created_at < now - RETENTION,
                    or_(
                        NotificationDelivery.delivered_at.is_not(None),
                        NotificationDelivery.given_up_at.is_not(None),
                    ),
                )
            )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def attempt_now(self, delivery_id: str) -> None:
        """Posts a delivery this process has just written (a test message), once."""
        await self._attempt(delivery_id)

    async def _attempt(self, delivery_id: str) -> None:
        async with self._limit:
            async with self.db.read() as session:
                delivery = await session.get(NotificationDelivery, delivery_id)
                destination = (
                    await session.get(NotificationDestination, delivery.destination_id) if delivery else None
                )
                org = await session.get(Organization, destination.org_id) if destination else None
            if delivery is None or destination is None or org is None:
                return
            outcome = await self._post(delivery, destination)
            await self._record(delivery, outcome)

    async def _post(self, delivery: NotificationDelivery, destination: NotificationDestination) -> Outcome:
        started = time.monotonic()

        def took() -> int:
            return int((time.monotonic() - started) * 1000)

        try:
            await check_webhook_url(destination.url, allow_private=self.ctx.settings.allow_private_webhooks)
        except PrivateAddress as error:
            return Outcome(None, took(), f"refused: {error}")
        public_url = self.ctx.settings.public_url
        headers = {
            "Content-Type": "application/json",
            "X-Firstlume-Event": delivery.event,
            "X-Firstlume-Delivery": delivery.id,
        }
        if destination.format == "slack":
            body = payloads.slack_body(delivery.payload, public_url=public_url)
        else:
            body = payloads.json_body(
                delivery.payload, delivery_id=delivery.id, sent_at=utcnow(), public_url=public_url
            )
            secret = reveal_secret(self.ctx.keyring, destination)
            if secret is not None:
                headers["X-Firstlume-Signature"] = payloads.signature(secret, body)
        try:
            response = await self._http.post(destination.url, content=body, headers=headers)
        except httpx.TimeoutException:
            return Outcome(None, took(), f"no answer within {TIMEOUT_SECONDS:g} seconds")
        except httpx.HTTPError as error:
            return Outcome(None, took(), f"{type(error).__name__}: {error}"[:1000])
        refusal = None
        if response.is_redirect:
            refusal = f"answered {response.status_code} (a redirect, which is never followed)"
        elif not response.is_success:
            refusal = f"answered {response.status_code}"
        return Outcome(response.status_code, took(), refusal)

    async def _record(self, delivery: NotificationDelivery, outcome: Outcome) -> None:
        now = utcnow()
        async with self.db.transaction() as session:
            number = delivery.attempts + 1
            session.add(
                NotificationAttempt(
                    delivery_id=delivery.id,
                    number=number,
                    at=now,
                    status_code=outcome.status_code,
                    duration_ms=outcome.duration_ms,
                    error=outcome.error,
                )
            )
            values: dict[str, object] = {
                "attempts": number,
                "leased_until": None,
                "last_error": outcome.error,
            }
            if outcome.delivered:
                values["delivered_at"] = now
            else:
                retry_at = now + timedelta(seconds=self.retries.delay(number))
                if delivery.test or retry_at > delivery.created_at + GIVE_UP_AFTER:
                    values["given_up_at"] = now
                else:
                    values["next_attempt_at"] = retry_at
            await session.execute(
                update(NotificationDelivery)
                .where(NotificationDelivery.id == delivery.id)
                .values(**values)
                .execution_options(synchronize_session=False)
            )
        if not outcome.delivered:
            log.warning(
                "notification %s (%s) attempt %d: %s", delivery.id, delivery.event, number, outcome.error
            )


async def send_test_delivery(ctx: Context, delivery_id: str) -> None:
    """Posts a test message now, through this process's sender (or a short-lived one: the CLI,
    tests without one)."""
    if ctx.notifier is not None:
        await ctx.notifier.attempt_now(delivery_id)
        return
    sender = NotificationSender(ctx)
    try:
        await sender.attempt_now(delivery_id)
    finally:
        await sender.stop()


def _lease_free(now: datetime):  # type: ignore[no-untyped-def]
    return or_(NotificationDelivery.leased_until.is_(None), NotificationDelivery.leased_until < now)
