"""Scheduler and API figures with thousands of stacks and runs.

    .venv/bin/python bench/bench_scheduler.py [sqlite|postgresql] [STACKS] [RUNS_PER_STACK]

Creates STACKS stacks with RUNS_PER_STACK queued runs each in a fresh database, then times:
one dispatch pass (claim the first run of every free stack), the organization's active-runs
query as the REST route serves it, and one stack's run list. PostgreSQL uses the local server
(user postgres, trust auth), in a database created and dropped here.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
from sqlalchemy import insert, select

from firstlume.api.rest.serializers import run_json
from firstlume.crypto import KeyRing, generate_key
from firstlume.db.engine import Database
from firstlume.db.migrate import upgrade
from firstlume.db.models import Organization, Run, Stack, User
from firstlume.pubsub import PubSub
from firstlume.services import dispatch
from firstlume.services.context import Context
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads.runs import RunPageKey
from firstlume.settings import Settings


async def _seed(db: Database, stacks: int, per_stack: int) -> None:
    async with db.transaction() as session:
        org = Organization(slug="bench", name="bench")
        user = User(email="bench@example.com")
        session.add_all([org, user])
        await session.flush()
        stack_rows = [
            {"id": uuid.uuid4().hex, "org_id": org.id, "slug": f"s{i}", "name": f"s{i}", "repository": "file:///r",
             "branch": "main", "path": ".", "run_counter": per_stack}
            for i in range(stacks)
        ]  # fmt: skip
        await session.execute(insert(Stack), stack_rows)
        run_rows = [
            {"id": uuid.uuid4().hex, "org_id": org.id, "stack_id": s["id"], "number": n, "type": "plan",
             "status": "queued", "created_by_id": user.id, "acknowledged": [], "variables_used": [], "state_backends": []}
            for s in stack_rows
            for n in range(1, per_stack + 1)
        ]  # fmt: skip
        for start in range(0, len(run_rows), 5000):
            await session.execute(insert(Run), run_rows[start : start + 5000])


async def _timed(label: str, work) -> object:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    result = await work()
    print(f"{label:<48} {1000 * (time.perf_counter() - started):9.1f} ms")
    return result


async def main(dialect: str, stacks: int, per_stack: int) -> None:
    pg_name = None
    if dialect == "postgresql":
        pg_name = f"fl_bench_{uuid.uuid4().hex[:8]}"
        conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres")
        await conn.execute(f'CREATE DATABASE "{pg_name}"')
        await conn.close()
        url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{pg_name}"
    else:
        url = f"sqlite+aiosqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    try:
        await asyncio.to_thread(upgrade, url)
        db = Database(url)
        key = generate_key()
        settings = Settings.from_env({"FIRSTLUME_DATABASE_URL": url, "FIRSTLUME_ENCRYPTION_KEYS": key})
        ctx = Context(settings=settings, db=db, keyring=KeyRing([key]), pubsub=PubSub("memory://"))
        print(f"{dialect}: {stacks} stacks x {per_stack} queued runs = {stacks * per_stack} runs")
        await _timed("seed", lambda: _seed(db, stacks, per_stack))
        claimed = 0
        started = time.perf_counter()
        while True:
            batch = await dispatch.claim_plans(ctx, limit=500)
            if not batch:
                break
            claimed += len(batch)
        print(f"{'dispatch: claim the first run of every stack':<48} {1000 * (time.perf_counter() - started):9.1f} ms"
              f"  ({claimed} claimed, {1000 * (time.perf_counter() - started) / max(claimed, 1):.2f} ms each)")  # fmt: skip

        async def active() -> int:
            async with db.transaction() as session:
                org = await session.scalar(select(Organization))
                assert org is not None
                [active_runs] = await run_reads.active_runs(session, [org.id])
                return len([run_json(d) for d in await run_reads.details(session, active_runs)])

        count = await _timed("active runs of the organization (REST shape)", active)
        print(f"{'':<48} ({count} runs)")

        async def stack_runs() -> int:
            async with db.transaction() as session:
                stack = await session.scalar(select(Stack).where(Stack.slug == "s0"))
                assert stack is not None
                [page] = await run_reads.stack_runs(session, [RunPageKey(stack.id, 100)])
                return len([run_json(d) for d in await run_reads.details(session, page)])

        await _timed("one stack's runs, newest first (REST shape)", stack_runs)
        await db.dispose()
    finally:
        if pg_name:
            conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres")
            await conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
            await conn.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(
        main(
            args[0] if args else "sqlite",
            int(args[1]) if len(args) > 1 else 2000,
            int(args[2]) if len(args) > 2 else 3,
        )
    )
