"""Live logs are read once per process and fanned out in memory: many readers of one run, each
from its own offset (or only one step), each get every character exactly once; a reader too slow
to keep up catches up from the database without holding the others back."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from conftest import Tenant, make_stack
from firstlume.services import dispatch, logs
from firstlume.services.context import Context
from firstlume.services.logs import LogSlice, follow_log
from support.executor_api import ExecutorReports
from support.runs import start

PLAN_JSON: dict[str, Any] = {"format_version": "1.2", "resource_changes": []}


@pytest.fixture
async def executor(
    app: Starlette, ctx: Context, tenant: Tenant
) -> AsyncIterator[tuple[str, ExecutorReports]]:
    """A run in its plan phase and the executor's reports, through the app whose process the
    readers follow."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, "acme", "net", "plan")
    [launch] = await dispatch.claim_plans(ctx)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="client://testserver"
    ) as client:
        yield run_id, ExecutorReports(client, launch.token)


async def collect(parts: AsyncIterator[LogSlice]) -> list[LogSlice]:
    return [part async for part in parts]


async def test_many_readers_from_their_own_offsets_each_get_every_character_once(
    app: Starlette, executor: tuple[str, ExecutorReports]
) -> None:
    run_id, reports = executor
    served: Context = app.state.ctx
    rng = random.Random(7)
    readers: list[tuple[str | None, int, asyncio.Task[list[LogSlice]]]] = []

    def follow(step: str | None, offset: int) -> None:
        task = asyncio.create_task(collect(follow_log(served, run_id, step, offset)))
        readers.append((step, offset, task))

    # Before anything is written: the whole log, and each step's.
    for _ in range(10):
        follow(None, 0)
    follow("init", 0)
    follow("plan", 0)
    chunks: list[tuple[str, int, str]] = []  # step, offset, text
    for step, lines in (("init", 120), ("plan", 240)):
        await reports.step(step, "running")
        for i in range(lines):
            text = f"{step} {i:04d} " + "x" * rng.randrange(0, 40) + "\n"
            chunks.append((step, reports.offset, text))
            await reports.log(step, text)
            if i % 20 == 10:
                # Readers joining mid-run: at the end, at a chunk's start, and inside a chunk.
                follow(None, reports.offset)
                follow(None, chunks[rng.randrange(len(chunks))][1])
                _, start_, text_ = chunks[rng.randrange(len(chunks))]
                follow(None, start_ + len(text_) // 2)
                follow(step, chunks[rng.randrange(len(chunks))][1])
                await asyncio.sleep(0)
        await reports.step(step, "done")
    await reports.plan(PLAN_JSON)
    assert await reports.finish() == "no_changes"
    follow(None, 0)  # after the end: straight from the database
    follow("init", 17)

    whole = reports.written
    assert len(readers) == 14 + 4 * 18
    for step, offset, task in readers:
        parts = await asyncio.wait_for(task, 30)
        received = "".join(p.text for p in parts)
        if step is None:
            assert received == whole[offset:], (step, offset)
            assert not parts or parts[-1].next_offset == len(whole)
        else:
            expected = "".join(
                text[max(0, offset - start_) :]
                for s, start_, text in chunks
                if s == step and start_ + len(text) > offset
            )
            assert received == expected, (step, offset)
        # Offsets only move forward, each message continuing where the last one ended.
        assert all(a.next_offset < b.next_offset for a, b in itertools.pairwise(parts))
    # Every reader has left: the process keeps no tail for the run.
    assert run_id not in served.log_tails._tails


async def test_a_slow_reader_catches_up_from_the_database_and_holds_no_one_back(
    app: Starlette, executor: tuple[str, ExecutorReports], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logs, "READER_BUFFER", 3)
    run_id, reports = executor
    served: Context = app.state.ctx
    await reports.step("plan", "running")
    await reports.log("plan", "first\n")
    slow = follow_log(served, run_id, None, 0)
    assert (await anext(slow)).text == "first\n"
    fast = asyncio.create_task(collect(follow_log(served, run_id, None, 0)))
    # The slow reader reads nothing now; the fast one gets all of it meanwhile.
    for i in range(50):
        await reports.log("plan", f"line {i}\n")
    await reports.step("plan", "done")
    await reports.plan(PLAN_JSON)
    await reports.finish()
    fast_parts = await asyncio.wait_for(fast, 30)
    assert "".join(p.text for p in fast_parts) == reports.written
    rest = await asyncio.wait_for(collect(slow), 30)
    assert "first\n" + "".join(p.text for p in rest) == reports.written
    assert rest[-1].next_offset == len(reports.written)


async def test_a_reader_of_a_finished_step_ends_with_it_while_the_run_goes_on(
    app: Starlette, executor: tuple[str, ExecutorReports]
) -> None:
    run_id, reports = executor
    served: Context = app.state.ctx
    await reports.step("init", "running")
    await reports.log("init", "init 1\n")
    await reports.step("init", "done")
    await reports.step("plan", "running")
    await reports.log("plan", "plan 1\n")
    # The run is still planning: the init step's reader ends, the plan step's waits for more.
    init = await asyncio.wait_for(collect(follow_log(served, run_id, "init", 0)), 10)
    assert [(p.text, p.next_offset) for p in init] == [("init 1\n", 7)]
    plan = asyncio.create_task(collect(follow_log(served, run_id, "plan", 0)))
    await reports.log("plan", "plan 2\n")
    await reports.step("plan", "done")
    assert "".join(p.text for p in await asyncio.wait_for(plan, 10)) == "plan 1\nplan 2\n"
