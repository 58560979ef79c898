"""The background-service base (firstlume/background.py) every loop of the control plane runs
on: a pass that raises is logged and counted and the loop goes on; stop is prompt; the health
entry and the metric follow the last good pass."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from firstlume import metrics
from firstlume.background import BackgroundService

log = logging.getLogger("firstlume.test-background")


class Scripted(BackgroundService):
    """Its passes do what the test queued: raise an error, block until cancelled, or pass."""

    def __init__(self, name: str, *, interval: float = 3600.0, stop_grace: float = 0.0) -> None:
        super().__init__(name, interval=interval, log=log, stop_grace=stop_grace)
        self.script: list[BaseException | str] = []
        self.passes = 0
        self.passed = asyncio.Event()
        self.failed = asyncio.Event()
        self.entered = asyncio.Event()

    async def run_pass(self) -> None:
        self.passes += 1
        self.entered.set()
        step = self.script.pop(0) if self.script else "pass"
        if isinstance(step, BaseException):
            self.failed.set()
            raise step
        if step == "block":
            await asyncio.Event().wait()
        if step == "slow":
            await asyncio.sleep(0.2)
        if step == "cancel becomes an error":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                raise RuntimeError("the driver's own error") from None
        self.passed.set()


async def next_event(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), 5)
    event.clear()


def failed_passes(name: str) -> float:
    sample = metrics.REGISTRY.get_sample_value("firstlume_background_failed_passes_total", {"service": name})
    return sample or 0.0


def last_pass_at(name: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(
        "firstlume_background_last_pass_timestamp_seconds", {"service": name}
    )


async def test_a_pass_that_raises_is_logged_and_counted_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    service = Scripted("test-failing")
    service.script = [ValueError("first"), ValueError("second"), KeyError("third")]
    await service.start()
    try:
        await next_event(service.failed)
        assert service.failures == 1 and failed_passes("test-failing") == 1
        assert service.health()["failed_passes_in_a_row"] == 1 and service.running
        # The next pass waits out the backoff, or a kick.
        for expected in (2, 3):
            service.kick()
            await next_event(service.failed)
            assert service.failures == expected
        service.kick()
        await next_event(service.passed)
        assert service.failures == 0 and failed_passes("test-failing") == 3
    finally:
        await service.stop()
    records = [r for r in caplog.records if r.name == log.name]
    # A traceback when the failures start and when their kind changes; one line for a repeat.
    assert [r.exc_info is not None for r in records] == [True, False, True, False]
    assert "2 passes in a row failed: ValueError: second" in records[1].getMessage()
    assert "works again after 3 failed passes" in records[3].getMessage()


async def test_a_cancellation_from_inside_a_pass_does_not_end_the_loop() -> None:
    service = Scripted("test-inner-cancel")
    service.script = [asyncio.CancelledError()]
    await service.start()
    try:
        await next_event(service.failed)
        service.kick()
        await next_event(service.passed)
        assert service.running and service.passes == 2
    finally:
        await service.stop()


async def test_the_health_entry_and_the_metric_follow_the_last_good_pass() -> None:
    service = Scripted("test-health")
    assert service.health() == {"up": False, "last_pass_age_s": None, "failed_passes_in_a_row": 0}
    before = time.time()
    await service.start()
    try:
        await next_event(service.passed)
        health = service.health()
        assert health["up"] is True and health["failed_passes_in_a_row"] == 0
        age = health["last_pass_age_s"]
        assert isinstance(age, float) and 0 <= age < 5
        stamp = last_pass_at("test-health")
        assert stamp is not None and before <= stamp <= time.time()
        service.script = [RuntimeError("down")]
        service.kick()
        await next_event(service.failed)
        assert last_pass_at("test-health") == stamp  # only good passes move it
        assert service.health()["failed_passes_in_a_row"] == 1
    finally:
        await service.stop()
    assert service.health()["up"] is False


@pytest.mark.parametrize("step", ["block", "cancel becomes an error", "pause"])
async def test_stop_is_prompt(step: str, caplog: pytest.LogCaptureFixture) -> None:
    """A pause of an hour, a pass that never ends, and one whose database driver turns the
    cancellation into an error of its own: each stops at once, and nothing is logged as failed."""
    service = Scripted("test-stop", interval=3600)
    service.script = [] if step == "pause" else [step]
    await service.start()
    await next_event(service.passed if step == "pause" else service.entered)
    await asyncio.wait_for(service.stop(), 2)
    assert not service.running and service.failures == 0
    assert not [r for r in caplog.records if r.name == log.name]


async def test_a_draining_service_ends_its_pass_and_makes_a_last_one_before_it_stops() -> None:
    service = Scripted("test-drain", stop_grace=5.0)
    await service.start()
    await next_event(service.passed)
    service.script = ["slow"]
    service.kick()
    await next_event(service.entered)
    await asyncio.wait_for(service.stop(), 2)
    assert service.passes == 3  # the first, the slow one that was running, and the last


async def test_a_draining_stop_cancels_a_pass_that_outlasts_its_grace() -> None:
    service = Scripted("test-drain-late", stop_grace=0.05)
    service.script = ["block"]
    await service.start()
    await next_event(service.entered)
    await asyncio.wait_for(service.stop(), 2)
    assert not service.running
