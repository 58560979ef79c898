"""bench/fleet.py's machinery at a tiny size, so that it cannot silently break: two replicas on
one PostgreSQL with simulated executors behind one address, watchers on both, replica 0 killed
with SIGKILL mid-run. Correctness only (every run applied; nothing lost, doubled or reordered,
stored or watched; no double launch); the bench reports the timings, never this test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fleet
from fleet_checks import Counts

STACKS, LINES, RESOURCES = 3, 30, 3


# The two run on one worker: four replicas at once, each with its pools, would take a good part
# of PostgreSQL's 100 connections from the rest of the suite.
@pytest.mark.xdist_group("fleet")
@pytest.mark.timeout(300)  # two replicas started, runs applied, one replica killed and its watchers moved
@pytest.mark.parametrize("pubsub", ["postgres", "redis"])
async def test_a_small_fleet_applies_every_run_and_every_watcher_gets_every_line_once_in_order_across_a_kill(
    pubsub: str, tmp_path: Path
) -> None:
    config = fleet.Config(
        stacks=STACKS, lines=LINES, rate=30, resources=RESOURCES, watchers=4, idle_watchers=0,
        replicas=2, pubsub=(pubsub,), kill=True, cpu_segments=False,
    )  # fmt: skip
    result = await fleet.fleet(config, pubsub, tmp_path)
    [seg] = result.segments
    assert seg.refused_starts == [] and seg.statuses == {"applied": STACKS}, seg
    assert seg.killed_at_s is not None
    # What the executors sent: the plans' lines and the applies' lines, two states per resource.
    assert seg.lines == STACKS * (fleet_plan_lines() + LINES)
    assert seg.resource_reports == STACKS * RESOURCES * 2
    assert seg.stored_lines == Counts() and seg.stored_states == Counts(), seg
    assert seg.watched_lines == Counts() and seg.watched_states == Counts(), seg
    assert seg.double_launches == 0 and seg.relaunches == 0, seg
    assert seg.unreported == [] and seg.watcher_errors == [], seg
    # Watchers were on both replicas: those on the killed one moved to the other and finished there.
    assert seg.watchers["runLog"] == 4 and seg.watchers["runLog reconnected"] >= 1, seg.watchers
    assert seg.watchers["activeRuns reconnected"] >= 1, seg.watchers


def fleet_plan_lines() -> int:
    from firstlume.executor.simulated import PLAN_LINES

    return PLAN_LINES + 2  # a line each in checkout and init
