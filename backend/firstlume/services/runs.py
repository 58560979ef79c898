"""Starting, reviewing and ending runs: what people do."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Organization, ResourceChange, Run, RunStatusChange, RunStep, Stack
from firstlume.db.types import utcnow
from firstlume.domain.errors import (
    AcknowledgementRequired,
    CannotCancel,
    InvalidRequest,
    InvalidStatus,
    NotFound,
)
from firstlume.domain.runs import ACTIVE, CANCELABLE, RunStatus, RunType
from firstlume.pubsub import SCHEDULER_CHANNEL, org_runs_channel, run_channel
from firstlume.services.context import Actor, Unit
from firstlume.services.transitions import change_status

RUN_TYPES = ", ".join(t.value for t in RunType)
DESTRUCTIVE_ACTIONS = ("delete", "replace")


def parse_run_type(value: Any) -> RunType:
    try:
        return RunType(value)
    except ValueError:
        raise InvalidRequest(f"'type' must be one of {RUN_TYPES}; got {value!r}.", field="type") from None


async def start_run(unit: Unit, actor: Actor, stack: Stack, body: dict[str, Any]) -> Run:
    unknown = sorted(set(body) - {"type"})
    if unknown:
        raise InvalidRequest(f"Unknown field '{unknown[0]}'; a run takes only 'type'.", field=unknown[0])
    if "type" not in body:
        raise InvalidRequest(f"'type' is required: one of {RUN_TYPES}.", field="type")
    run_type = parse_run_type(body["type"])
    session = unit.session
    # The counter update takes the stack's row lock (PostgreSQL) or the write lock (SQLite):
    # concurrent starts get consecutive numbers, which are the queue's arrival order.
    number = await session.scalar(
        update(Stack)
        .where(Stack.id == stack.id)
        .values(run_counter=Stack.run_counter + 1)
        .returning(Stack.run_counter)
    )
    now = utcnow()
    run = Run(
        org_id=stack.org_id,
        stack_id=stack.id,
        number=number,
        type=run_type.value,
        status=RunStatus.QUEUED.value,
        created_at=now,
        updated_at=now,
        created_by_id=actor.user_id,
        acknowledged=[],
        variables_used=[],
        state_backends=[],
    )
    session.add(run)
    await session.flush()
    session.add(
        RunStatusChange(run_id=run.id, from_status=None, to_status=run.status, at=now, actor=actor.email)
    )
    event = {"type": "status", "run_id": run.id, "status": run.status, "from": None}
    unit.publish_after_commit(run_channel(run.id), event)
    unit.publish_after_commit(org_runs_channel(run.org_id), event)
    unit.publish_after_commit(SCHEDULER_CHANNEL, event)
    return run


async def run_in_org(session: AsyncSession, org: Organization, run_id: str, *, lock: bool = False) -> Run:
    query = select(Run).where(Run.id == run_id, Run.org_id == org.id)
    if lock:
        query = query.with_for_update()
    run = await session.scalar(query) if isinstance(run_id, str) and len(run_id) <= 64 else None
    if run is None:
        raise NotFound(f"No run '{run_id}' in this organization.")
    return run


async def destructive_addresses(session: AsyncSession, run_id: str) -> list[str]:
    return list(
        await session.scalars(
            select(ResourceChange.address)
            .where(ResourceChange.run_id == run_id, ResourceChange.action.in_(DESTRUCTIVE_ACTIONS))
            .order_by(ResourceChange.position)
        )
    )


def _acknowledged_list(body: dict[str, Any]) -> list[str]:
    unknown = sorted(set(body) - {"acknowledged"})
    if unknown:
        raise InvalidRequest(
            f"Unknown field '{unknown[0]}'; approval takes only 'acknowledged'.", field=unknown[0]
        )
    value = body.get("acknowledged", [])
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise InvalidRequest(
            "'acknowledged' must be a list of resource addresses (strings).", field="acknowledged"
        )
    return list(dict.fromkeys(value))


async def mark_changes_pending(session: AsyncSession, run_id: str) -> None:
    """Approved, not started: every listed resource (and each stage of a replacement) is pending."""
    for change in await session.scalars(select(ResourceChange).where(ResourceChange.run_id == run_id)):
        change.state = "pending"
        change.stages = [{"action": stage["action"], "state": "pending"} for stage in change.stages]


async def approve_run(unit: Unit, actor: Actor, run: Run, body: dict[str, Any]) -> Run:
    acknowledged = _acknowledged_list(body)
    if run.status != RunStatus.AWAITING_APPROVAL:
        raise InvalidStatus(
            f"Run {run.id} is {run.status}; only a run awaiting approval can be approved.", status=run.status
        )
    destructive = await destructive_addresses(unit.session, run.id)
    if run.confirm_destructive:
        missing = [address for address in destructive if address not in acknowledged]
        if missing:
            raise AcknowledgementRequired(missing)
    confirmed = [address for address in destructive if address in acknowledged]
    await mark_changes_pending(unit.session, run.id)
    await set_step(unit, run, "approval", "done")
    return await change_status(
        unit,
        run,
        RunStatus.APPLY_QUEUED,
        actor=actor.email,
        approved_by_id=actor.user_id,
        approved_at=utcnow(),
        acknowledged=confirmed,
    )


async def discard_run(unit: Unit, actor: Actor, run: Run) -> Run:
    if run.status != RunStatus.AWAITING_APPROVAL:
        raise InvalidStatus(
            f"Run {run.id} is {run.status}; only a run awaiting approval can be discarded.", status=run.status
        )
    await set_step(unit, run, "approval", "skipped")
    return await change_status(unit, run, RunStatus.DISCARDED, actor=actor.email, reason="discarded")


async def cancel_run(unit: Unit, actor: Actor, run: Run) -> Run:
    if run.status not in CANCELABLE:
        reason = (
            "interrupting a running phase can corrupt the state"
            if run.status in (RunStatus.PLANNING, RunStatus.APPLYING)
            else "it has already finished"
            if run.status not in ACTIVE
            else "it is awaiting approval: discard it instead"
        )
        raise CannotCancel(
            f"Run {run.id} is {run.status} and cannot be canceled: {reason}. Only queued and apply_queued runs can be canceled.",
            status=run.status,
        )
    return await change_status(unit, run, RunStatus.CANCELED, actor=actor.email, reason="canceled")


async def set_step(unit: Unit, run: Run, name: str, status: str) -> RunStep:
    """Creates or moves a step; times follow the status."""
    session = unit.session
    step = await session.scalar(select(RunStep).where(RunStep.run_id == run.id, RunStep.name == name))
    now = utcnow()
    if step is None:
        position = (await session.scalar(select(func.count()).where(RunStep.run_id == run.id))) or 0
        step = RunStep(run_id=run.id, name=name, position=position, status="pending")
        session.add(step)
    if status == "running" and step.started_at is None:
        step.started_at = now
    if status in ("done", "failed", "skipped"):
        step.started_at = step.started_at or now
        step.finished_at = now
    step.status = status
    await session.flush()
    unit.publish_after_commit(
        run_channel(run.id), {"type": "step", "run_id": run.id, "step": name, "status": status}
    )
    return step
