"""The retry policies (firstlume/retry.py): what each retries and what it does not, how many
times, and how long it waits between tries, with the sleeps recorded rather than slept."""

from __future__ import annotations

import httpx
import pytest

from firstlume import retry
from firstlume.executor.client import ControlPlaneUnavailable, ExecutorClient, RequestRejected, Unauthorized


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_a_backoff_doubles_up_to_its_cap_within_its_jitter() -> None:
    backoff = retry.Backoff(first=0.5, longest=4.0, jitter=(0.8, 1.2))
    for failures, nominal in ((1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 4.0), (10_000, 4.0)):
        for _ in range(20):
            assert nominal * 0.8 <= backoff.delay(failures) <= nominal * 1.2
    assert 0.4 <= backoff.delay(0) <= 0.6  # no failure yet counts as the first


def test_the_stored_schedules_follow_their_policies() -> None:
    assert 0.4 <= retry.EVENT_PUBLISH.delay(1) <= 0.6 and 24 <= retry.EVENT_PUBLISH.delay(20) <= 36
    notification = retry.notification_delivery(first=30)
    assert 24 <= notification.delay(1) <= 36 and 2880 <= notification.delay(30) <= 4320


async def test_a_policy_retries_what_it_is_told_and_raises_the_last_error_as_it_was() -> None:
    sleeps = Sleeps()
    calls = 0
    with pytest.raises(ConnectionError, match="try 3"):
        async for attempt in retry.Policy(attempts=3, wait=retry.Backoff(1, 10)).retrying(
            ConnectionError, sleep=sleeps
        ):
            with attempt:
                calls += 1
                raise ConnectionError(f"try {calls}")
    assert calls == 3 and len(sleeps) == 2 and 0.8 <= sleeps[0] <= 1.2 and 1.6 <= sleeps[1] <= 2.4


async def test_a_policy_does_not_retry_other_errors() -> None:
    sleeps = Sleeps()
    calls = 0
    with pytest.raises(ValueError):
        async for attempt in retry.BROKER_RECONNECT.retrying(ConnectionError, sleep=sleeps):
            with attempt:
                calls += 1
                raise ValueError("not a connection error")
    assert calls == 1 and sleeps == []


async def test_an_endless_policy_tries_until_it_works() -> None:
    sleeps = Sleeps()
    calls = 0
    async for attempt in retry.BROKER_RECONNECT.retrying(OSError, sleep=sleeps):
        with attempt:
            calls += 1
            if calls < 50:
                raise OSError("refused")
    assert calls == 50 and max(sleeps) <= 5.0 * 1.2  # capped


async def test_a_moved_head_is_decided_again_at_once_three_times_at_most() -> None:
    sleeps = Sleeps()
    calls = 0

    class Moved(Exception):
        pass

    with pytest.raises(Moved):
        async for attempt in retry.HEAD_MOVED.retrying(Moved, sleep=sleeps):
            with attempt:
                calls += 1
                raise Moved
    assert calls == 3 and sleeps == [0, 0]


def test_the_wal_switch_retries_a_locked_database_only() -> None:
    slept: list[float] = []

    def locked(error: BaseException) -> bool:
        return "database is locked" in str(error)

    calls = 0
    for attempt in retry.SQLITE_WAL_SWITCH.retrying_sync(locked, sleep=slept.append):
        with attempt:
            calls += 1
            if calls < 4:
                raise RuntimeError("database is locked")
    assert calls == 4 and slept == pytest.approx([0.02, 0.04, 0.06])

    with pytest.raises(RuntimeError, match="disk I/O error"):
        for attempt in retry.SQLITE_WAL_SWITCH.retrying_sync(locked, sleep=slept.append):
            with attempt:
                raise RuntimeError("disk I/O error")
    assert len(slept) == 3


def answering(*answers: int | Exception) -> tuple[httpx.MockTransport, list[str]]:
    """A control plane that answers each request with the next status (or raises the error)."""
    seen: list[str] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        body = {"error": {"code": f"http_{answer}", "message": "no"}} if answer >= 400 else {}
        return httpx.Response(answer, json=body)

    return httpx.MockTransport(handle), seen


async def test_the_executor_retries_connection_errors_and_5xx_then_gives_up() -> None:
    sleeps = Sleeps()
    transport, seen = answering(httpx.ConnectError("refused"), 502, 503)
    client = ExecutorClient("http://cp", "t", transport=transport, sleep=sleeps)
    with pytest.raises(ControlPlaneUnavailable, match="failed after 10 attempts; last error: 503"):
        await client.report_resources([])
    assert len(seen) == retry.CONTROL_PLANE_REQUEST.attempts == 10
    # 0.5 s doubling to 10 s, each 50-100 % of that.
    for sleep, nominal in zip(sleeps, (0.5, 1, 2, 4, 8, 10, 10, 10, 10), strict=True):
        assert nominal / 2 <= sleep <= nominal

    transport, seen = answering(httpx.ReadTimeout("slow"), 500, 200)
    client = ExecutorClient("http://cp", "t", transport=transport, sleep=Sleeps())
    await client.report_resources([])
    assert len(seen) == 3


@pytest.mark.parametrize(
    ("status", "error"), [(400, RequestRejected), (401, Unauthorized), (409, RequestRejected)]
)
async def test_the_executor_does_not_retry_a_refusal(status: int, error: type[Exception]) -> None:
    sleeps = Sleeps()
    transport, seen = answering(status)
    client = ExecutorClient("http://cp", "t", transport=transport, sleep=sleeps)
    with pytest.raises(error):
        await client.report_resources([])
    assert len(seen) == 1 and sleeps == []


async def test_a_heartbeat_is_tried_once() -> None:
    transport, seen = answering(503)
    client = ExecutorClient("http://cp", "t", transport=transport, sleep=Sleeps())
    with pytest.raises(ControlPlaneUnavailable, match="after 1 attempts"):
        await client.heartbeat()
    assert len(seen) == 1
