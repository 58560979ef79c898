"""An executor dies while the database cannot store anything (a full disk): the scheduler keeps
the death and records it at a later pass, so the run ends failed with the storage named and the
executor's reason once it can be stored, rather than staying `planning` or `applying`."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from conftest import Tenant, make_stack
from firstlume.db.models import Run
from firstlume.launchers.base import ExecutorDied, PhaseRef
from firstlume.scheduler.loop import Scheduler
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.launchers import QuietLauncher
from support.runs import start


class IdleLauncher(QuietLauncher):
    """Launches nothing (the phase is claimed by the test) and stops what it is asked to."""

    def __init__(self) -> None:
        self.cleaned: list[PhaseRef] = []

    async def cleanup(self, ref: PhaseRef) -> None:
        self.cleaned.append(ref)


async def test_a_death_the_database_could_not_store_is_recorded_at_a_later_pass(
    ctx: Context, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, tenant.org, "net", "plan")
    (launch,) = await dispatch.claim_plans(ctx)
    ref = PhaseRef(launch.run_id, launch.phase, launch.attempt)
    launcher = IdleLauncher()
    scheduler = Scheduler(ctx, launcher)  # type: ignore[arg-type]

    real = dispatch.on_executor_died
    disk_full = True

    async def on_executor_died(ctx: Context, died: ExecutorDied) -> Any:
        if disk_full:
            raise OSError("database or disk is full")
        return await real(ctx, died)

    monkeypatch.setattr(dispatch, "on_executor_died", on_executor_died)
    died = ExecutorDied(ref, "The executor process exited with code 137 before it reported a result.")
    await scheduler._on_death(died)

    async def status() -> tuple[str, str | None]:
        async with ctx.db.transaction() as session:
            run = await session.scalar(select(Run).where(Run.id == run_id))
            assert run is not None
            return str(run.status), run.error

    assert await status() == ("planning", None)
    await scheduler.tick()  # still full: kept
    assert await status() == ("planning", None) and launcher.cleaned == []

    disk_full = False
    await scheduler.tick()
    # The phase's reports could not be stored either: the error says storage first.
    status_now, error = await status()
    assert status_now == "failed"
    assert error == (
        "storage full: the database's disk was full, so this phase's heartbeats and reports could not "
        f"be stored and its executor was stopped. {died.reason}"
    )
    assert launcher.cleaned == [ref]
    await scheduler.tick()  # recorded once: nothing left to retry
    assert scheduler._unrecorded == {}
