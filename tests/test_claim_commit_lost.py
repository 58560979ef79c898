"""A claim whose COMMIT loses its answer (the database ended the connection with the COMMIT in
flight): whether the server committed it or not, its runs are launched or claimable again, never
left in `planning` without an executor until the heartbeat timeout."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from conftest import Tenant, make_stack
from firstlume.db.models import Run
from firstlume.domain.runs import RunStatus
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.runs import start


@pytest.fixture
def answer_lost_once() -> Iterator[Any]:
    """Makes the next COMMIT (before or after it reaches the server) raise as a dropped
    connection would."""
    installed: list[tuple[str, Any]] = []

    def lose(moment: str) -> None:
        def raise_once(_session: Session, transaction: Any = None) -> None:
            if transaction is not None and transaction.parent is not None:
                return  # a savepoint's end: the COMMIT is the outermost transaction's
            event.remove(Session, moment, raise_once)
            installed.clear()
            raise DBAPIError("COMMIT", None, ConnectionError("the connection ended"))

        event.listen(Session, moment, raise_once)
        installed.append((moment, raise_once))

    yield lose
    for moment, listener in installed:
        event.remove(Session, moment, listener)


@pytest.fixture
async def queued_run(ctx: Context, tenant: Tenant) -> str:
    """A plan run queued on a new stack: the next claim's only candidate."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    return await start(ctx, tenant.token, tenant.org, "net", "plan")


async def status_of(ctx: Context, run_id: str) -> str:
    async with ctx.db.read() as session:
        run = await session.get(Run, run_id)
        assert run is not None
        return run.status


async def test_a_claim_that_committed_is_launched_though_its_answer_was_lost(
    ctx: Context, queued_run: str, answer_lost_once: Any
) -> None:
    answer_lost_once("after_transaction_end")
    [launch] = await dispatch.claim_plans(ctx)
    assert launch.run_id == queued_run and launch.phase == "plan"
    assert await status_of(ctx, queued_run) == RunStatus.PLANNING
    assert await dispatch.claim_plans(ctx) == []  # launched once, not claimed again


async def test_a_claim_that_did_not_commit_leaves_its_run_queued_for_the_next_pass(
    ctx: Context, queued_run: str, answer_lost_once: Any
) -> None:
    answer_lost_once("before_commit")
    with pytest.raises(DBAPIError):
        await dispatch.claim_plans(ctx)
    assert await status_of(ctx, queued_run) == RunStatus.QUEUED
    [launch] = await dispatch.claim_plans(ctx)
    assert launch.run_id == queued_run
