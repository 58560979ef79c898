"""P4: the scheduler claiming queued runs, with its floor; then two read figures over the result.

    .venv/bin/python bench/bench_scheduler.py [sqlite|postgresql] [STACKS] [REPEAT]

Each figure starts from a fresh database holding STACKS stacks (default 1,000) with one queued
plan run each, and ends when every run is claimed:

- floor: one bulk UPDATE moving every queued run to `planning` (what the database itself needs);
- back to back: one control-plane process calling dispatch.claim_plans until the queue is empty;
- two control planes (PostgreSQL): two such processes at once, each with its own engine;
- at the loop's pace: the real Scheduler loop (default FIRSTLUME_SCHEDULER_INTERVAL) with a
  launcher that only records launches, until every run is launched.

Every claim is counted: a run launched twice is reported (targets: 0 double launches, all
claimed within 2 s back to back, two control planes faster than one, within 3 s at the loop's
pace). PostgreSQL uses the local server (user postgres, trust auth), in databases created and
dropped here.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy import insert, select, update

from firstlume.api.rest.serializers import run_json
from firstlume.crypto import KeyRing, generate_key
from firstlume.db.engine import Database
from firstlume.db.migrate import upgrade
from firstlume.db.models import Organization, Run, Stack, User
from firstlume.launchers.base import DeathCallback, ExecutorDied, PhaseLaunch, PhaseRef
from firstlume.pubsub import PubSub
from firstlume.scheduler.loop import Scheduler
from firstlume.services import dispatch
from firstlume.services.context import Context
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads.runs import RunPageKey
from firstlume.settings import Settings

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
KEY = generate_key()


# -- databases ------------------------------------------------------------------------------------


async def _new_database(dialect: str) -> tuple[str, str | None]:
    if dialect == "postgresql":
        name = f"fl_bench_{uuid.uuid4().hex[:8]}"
        conn = await asyncpg.connect(PG_ADMIN)
        await conn.execute(f'CREATE DATABASE "{name}"')
        await conn.close()
        url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    else:
        name = None
        url = f"sqlite+aiosqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    await asyncio.to_thread(upgrade, url)
    return url, name


async def _drop(name: str | None) -> None:
    if name:
        conn = await asyncpg.connect(PG_ADMIN)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


async def _seed(url: str, stacks: int) -> None:
    db = Database(url)
    async with db.transaction() as session:
        org = Organization(slug="bench", name="bench")
        user = User(email="bench@example.com")
        session.add_all([org, user])
        await session.flush()
        stack_rows = [
            {"id": uuid.uuid4().hex, "org_id": org.id, "slug": f"s{i}", "name": f"s{i}", "repository": "file:///r",
             "branch": "main", "path": ".", "run_counter": 1}
            for i in range(stacks)
        ]  # fmt: skip
        await session.execute(insert(Stack), stack_rows)
        run_rows = [
            {"id": uuid.uuid4().hex, "org_id": org.id, "stack_id": s["id"], "number": 1, "type": "plan",
             "status": "queued", "created_by_id": user.id, "acknowledged": [], "variables_used": [],
             "state_backends": []}
            for s in stack_rows
        ]  # fmt: skip
        for start in range(0, len(run_rows), 5000):
            await session.execute(insert(Run), run_rows[start : start + 5000])
    await db.dispose()


def _context(url: str, **settings: str) -> Context:
    env = {"FIRSTLUME_DATABASE_URL": url, "FIRSTLUME_ENCRYPTION_KEYS": KEY, **settings}
    return Context(
        settings=Settings.from_env(env), db=Database(url), keyring=KeyRing([KEY]), pubsub=PubSub("memory://")
    )


async def _fresh(dialect: str, stacks: int) -> tuple[str, str | None]:
    url, name = await _new_database(dialect)
    await _seed(url, stacks)
    return url, name


# -- the figures -----------------------------------------------------------------------------------


async def floor(url: str) -> float:
    db = Database(url)
    started = time.perf_counter()
    async with db.transaction() as session:
        await session.execute(
            update(Run)
            .where(Run.status == "queued")
            .values(status="planning", phase_attempt=Run.phase_attempt + 1)
        )
    elapsed = time.perf_counter() - started
    await db.dispose()
    return elapsed


async def _claim_all(ctx: Context) -> list[str]:
    claimed: list[str] = []
    while batch := await dispatch.claim_plans(ctx):
        claimed += [launch.run_id for launch in batch]
    return claimed


async def _control_plane(url: str, ready: Any, go: Any) -> list[str]:
    """One control plane's claims, after it warmed up like a running server would have (its
    engine connected, its ORM mappers configured)."""
    ctx = _context(url)
    await ctx.pubsub.connect()
    async with ctx.db.transaction() as session:
        await session.scalar(select(Run.id).limit(1))
    ready.wait()
    go.wait()
    try:
        return await _claim_all(ctx)
    finally:
        await ctx.pubsub.disconnect()
        await ctx.db.dispose()


def _worker(url: str, ready: Any, go: Any, results: Any) -> None:
    results.put(asyncio.run(_control_plane(url, ready, go)))


def control_planes(url: str, count: int) -> tuple[float, list[str]]:
    """`count` processes claiming at once, each with its own engine, timed from a common start."""
    context = multiprocessing.get_context("spawn")
    ready, go, results = context.Barrier(count + 1), context.Event(), context.Queue()
    workers = [context.Process(target=_worker, args=(url, ready, go, results)) for _ in range(count)]
    for worker in workers:
        worker.start()
    ready.wait()
    started = time.perf_counter()
    go.set()
    claimed = [run_id for _ in workers for run_id in results.get(timeout=300)]
    elapsed = time.perf_counter() - started
    for worker in workers:
        worker.join()
    return elapsed, claimed


class RecordingLauncher:
    """Counts launches; its executors never run, which is all the scheduler's pace needs."""

    def __init__(self, expected: int) -> None:
        self.launched: list[str] = []
        self.expected = expected
        self.done = asyncio.Event()

    async def start(self, on_death: DeathCallback) -> None:
        return None

    async def launch(self, launch: PhaseLaunch) -> None:
        self.launched.append(launch.run_id)
        if len(self.launched) >= self.expected:
            self.done.set()

    async def check_health(self, active: list[PhaseRef]) -> list[ExecutorDied]:
        return []

    async def cleanup(self, ref: PhaseRef) -> None:
        return None

    async def cancel(self, run_id: str) -> None:
        return None

    async def close(self) -> list[ExecutorDied]:
        return []


async def loop_pace(url: str, stacks: int) -> tuple[float, list[str]]:
    ctx = _context(url)
    await ctx.pubsub.connect()
    launcher = RecordingLauncher(stacks)
    scheduler = Scheduler(ctx, launcher)
    started = time.perf_counter()
    await scheduler.start()
    try:
        await asyncio.wait_for(launcher.done.wait(), timeout=600)
        elapsed = time.perf_counter() - started
    finally:
        await scheduler.stop()
        await ctx.pubsub.disconnect()
        await ctx.db.dispose()
    return elapsed, launcher.launched


def _line(label: str, seconds: float, claimed: list[str] | None = None, stacks: int = 0) -> None:
    text = f"{label:<44} {seconds:8.2f} s"
    if claimed is not None:
        doubles = sum(1 for count in Counter(claimed).values() if count > 1)
        text += f"  ({len(set(claimed))}/{stacks} claimed, {doubles} launched twice)"
    print(text, flush=True)


async def _with_fresh(
    dialect: str, stacks: int, work: Callable[[str], Awaitable[tuple[float, list[str]]]]
) -> tuple[float, list[str]]:
    url, name = await _fresh(dialect, stacks)
    try:
        return await work(url)
    finally:
        await _drop(name)


async def reads(dialect: str, stacks: int) -> None:
    """Two read figures the claims touch: the organization's active runs and one stack's runs."""
    url, name = await _fresh(dialect, stacks)
    try:
        db = Database(url)

        async def active() -> int:
            async with db.transaction() as session:
                org = await session.scalar(select(Organization))
                assert org is not None
                [active_runs] = await run_reads.active_runs(session, [org.id])
                return len([run_json(d) for d in await run_reads.details(session, active_runs)])

        async def stack_runs() -> int:
            async with db.transaction() as session:
                stack = await session.scalar(select(Stack).where(Stack.slug == "s0"))
                assert stack is not None
                [page] = await run_reads.stack_runs(session, [RunPageKey(stack.id, 100)])
                return len([run_json(d) for d in await run_reads.details(session, page)])

        for label, work in (
            ("active runs of the organization (REST)", active),
            ("one stack's runs (REST)", stack_runs),
        ):
            started = time.perf_counter()
            count = await work()
            print(f"{label:<44} {time.perf_counter() - started:8.2f} s  ({count} runs)")
        await db.dispose()
    finally:
        await _drop(name)


def _median(figures: list[tuple[float, list[str]]]) -> tuple[float, list[str]]:
    """The run with the median time, with its claims: the machine is shared, so one run alone says little."""
    return sorted(figures, key=lambda figure: figure[0])[len(figures) // 2]


async def main(dialect: str, stacks: int, repeat: int) -> None:
    print(
        f"P4 {dialect}: {stacks} stacks, one queued run each; median of {repeat} runs, each on a fresh "
        "database (2 cores; wall time)"
    )
    floors = []
    for _ in range(repeat):
        url, name = await _fresh(dialect, stacks)
        try:
            floors.append(await floor(url))
        finally:
            await _drop(name)
    _line("floor: one bulk UPDATE of every run", sorted(floors)[len(floors) // 2])
    for count in (1, 2) if dialect == "postgresql" else (1,):
        figures = []
        for _ in range(repeat):
            url, name = await _fresh(dialect, stacks)
            try:
                figures.append(await asyncio.to_thread(control_planes, url, count))
            finally:
                await _drop(name)
        label = "one control plane" if count == 1 else f"{count} control planes"
        _line(f"claimed back to back, {label}", *_median(figures), stacks)
    figures = [await _with_fresh(dialect, stacks, lambda url: loop_pace(url, stacks)) for _ in range(repeat)]
    _line("launched by the scheduler loop", *_median(figures), stacks)
    await reads(dialect, stacks)


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(
        main(
            args[0] if args else "sqlite",
            int(args[1]) if len(args) > 1 else 1000,
            int(args[2]) if len(args) > 2 else 3,
        )
    )
