"""Every retry of Firstlume by name: what is retried, how many times, how long between tries.

| policy | where | what is retried | tries | between tries |
|---|---|---|---|---|
| CONTROL_PLANE_REQUEST | executor/client.py | a request whose connection failed or that got a 5xx | 6 | 0.5 s doubling to 10 s, 50-100 % |
| BROKER_RECONNECT | pubsub.py, pubsub_redis.py, scheduler/loop.py | the LISTEN connection to PostgreSQL, the subscribed connection to Redis, the scheduler's wake-up subscription | until it works | 0.05 s doubling to 5 s, ±20 % |
| HEAD_MOVED | services/git/pushes.py | a push whose stacks' heads another delivery moved first | 3 | none: read again at once |
| SQLITE_WAL_SWITCH | db/engine.py | switching a new SQLite file to WAL ("database is locked") | 20 | 0.02 s, 0.04 s, ... |
| EVENT_PUBLISH | services/outbox.py | events the broker refused (the row's next try) | until published | 0.5 s doubling to 30 s, ±20 % |
| notification_delivery | services/notifications/sender.py | a webhook not answered 2xx (the row's next try) | for 24 hours | the setting, doubling to 1 h, ±20 % |
| SERVICE_PASS | background.py | a background service's failed pass | for ever | at least 1 s doubling to 15 s, ±20 % |

Loops that try again at their next tick (the executor's heartbeat and shippers) need no policy.
Retries within one call go through tenacity (`Policy.retrying`);
the outbox and the notification sender keep a row's next try in the database, `Backoff.delay`
after its failures. tenacity rather than stamina: stamina is a layer over tenacity that cannot
take the sleep a test or a synchronous hook supplies, and retries on exceptions only.

This module imports nothing of ours: the executor uses it too, and loads nothing of the server.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_base,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_attempt,
    stop_never,
    wait_incrementing,
    wait_none,
)

Wait = Callable[[RetryCallState], float]
Sleep = Callable[[float], Awaitable[None]]
# What a policy retries: exception types, or a test of the exception.
Retryable = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]


@dataclass(frozen=True)
class Backoff:
    """Doubling from `first` seconds up to `longest`, each delay scaled by a random factor within
    `jitter`, so that clients that failed together do not all try again together."""

    first: float
    longest: float
    jitter: tuple[float, float] = (0.8, 1.2)

    def delay(self, failures: int) -> float:
        """Seconds before the next try after `failures` failed ones."""
        doublings = min(max(failures, 1) - 1, 64)  # far past `longest`, and no float overflow
        return min(self.first * 2.0**doublings, self.longest) * random.uniform(*self.jitter)

    def __call__(self, state: RetryCallState) -> float:
        """tenacity's wait: the delay after the attempt that just failed."""
        return self.delay(state.attempt_number)


@dataclass(frozen=True)
class Policy:
    """How often and how patiently to try; what to retry is the caller's, named where it calls."""

    attempts: int | None  # None: until it works, or until the caller is cancelled
    wait: Wait | None  # None: at once

    def retrying(
        self,
        on: Retryable,
        *,
        attempts: int | None = None,
        sleep: Sleep = asyncio.sleep,
        log: logging.Logger | None = None,
        what: str = "",
    ) -> AsyncRetrying:
        """`async for attempt in policy.retrying(...): with attempt: ...`. When the tries run out,
        the last error is raised as it was. With `log`, each failed try is a warning naming `what`."""
        tries = attempts or self.attempts
        return AsyncRetrying(
            sleep=sleep,
            retry=_retried(on),
            stop=stop_never if tries is None else stop_after_attempt(tries),
            wait=self.wait or wait_none(),
            reraise=True,
            before_sleep=None if log is None else _warn(log, what),
        )

    def retrying_sync(self, on: Retryable, *, sleep: Callable[[float], None]) -> Retrying:
        """`retrying` for code that cannot await (an engine's connect hook): it sleeps with `sleep`."""
        return Retrying(
            sleep=sleep,
            retry=_retried(on),
            stop=stop_never if self.attempts is None else stop_after_attempt(self.attempts),
            wait=self.wait or wait_none(),
            reraise=True,
        )


def _retried(on: Retryable) -> retry_base:
    if isinstance(on, type | tuple):
        return retry_if_exception_type(on)
    return retry_if_exception(on)


def _warn(log: logging.Logger, what: str) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning("%s failed (%s); try %d in %.2fs", what, error, state.attempt_number + 1, wait)

    return before_sleep


# An executor's request to the control plane: ten tries span 28-56 s, so a phase outlives a
# control plane's restart (a rolling deploy, a crashed process started again) rather than failing
# a run whose Terraform is still working; six tries (8-16 s) lost applies to restarts that took
# longer than that on a busy machine (tests/e2e/test_control_plane_outage.py).
CONTROL_PLANE_REQUEST = Policy(attempts=10, wait=Backoff(first=0.5, longest=10.0, jitter=(0.5, 1.0)))
BROKER_RECONNECT = Policy(attempts=None, wait=Backoff(first=0.05, longest=5.0))
HEAD_MOVED = Policy(attempts=3, wait=None)
SQLITE_WAL_SWITCH = Policy(attempts=20, wait=wait_incrementing(start=0.02, increment=0.02))
EVENT_PUBLISH = Backoff(first=0.5, longest=30.0)
SERVICE_PASS = Backoff(first=1.0, longest=15.0)
NOTIFICATION_LONGEST_WAIT = 3600.0


def notification_delivery(first: float) -> Backoff:
    """A webhook's next try: first after `first` seconds (FIRSTLUME_NOTIFICATION_FIRST_RETRY),
    doubling up to an hour; the sender gives up 24 hours after the event."""
    return Backoff(first=first, longest=NOTIFICATION_LONGEST_WAIT)
