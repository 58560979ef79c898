"""Starting, reviewing and ending runs: what people do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import ResourceChange, Run, Stack, new_id
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import (
    AcknowledgementRequired,
    InvalidRequest,
    InvalidStatus,
    NotFound,
    ProposedRun,
)
from firstlume.domain.policies import approvals_text
from firstlume.domain.runs import CANCELABLE, INITIAL, RUNNING, RunStatus, RunType, TriggerKind
from firstlume.protocol.events import RunUpdated
from firstlume.pubsub import run_channel
from firstlume.services import audit
from firstlume.services.access.approvers import require_approver
from firstlume.services.commands import ApproveRun, CancelRun, DiscardRun, StartRun
from firstlume.services.context import Actor, Unit
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord
from firstlume.services.reads.runs import RunRecord, run_record
from firstlume.services.transitions import change_status

DESTRUCTIVE_ACTIONS = ("delete", "replace")


@dataclass(frozen=True)
class Trigger:
    """What starts a run when no person does: a push (its commit and delivery), the drift
    schedule, or an upstream apply that changed an output the stack reads (`upstream_run`).
    `by` stands in the run's `created_by`: "git:<author email>", "schedule", "dependency:<stack>"."""

    kind: TriggerKind
    by: str
    commit: str | None = None
    delivery: str | None = None
    upstream_run: str | None = None
    # A pull request's run (kind pull_request): the trigger's `pull_request` and its row.
    pull_request: dict[str, Any] | None = None
    pull_request_id: str | None = None


async def start_run(
    unit: Unit,
    actor: Actor | None,
    stack: StackRecord | Stack,
    command: StartRun,
    *,
    trigger: Trigger | None = None,
    configuration_version: str | None = None,
) -> RunRecord:
    """Queues a run of `stack`, started by `actor` (a person), or else by `trigger`; at the branch's
    tip, or at `command.commit` (one an earlier run of the stack planned: Retry). A person's run
    started through the Terraform CLI names the `configuration_version` it plans."""
    if (actor is None) == (trigger is None):
        raise ValueError("a run is started by a person or by a trigger, and by only one")
    if command.commit is not None:
        await _check_known_commit(unit.session, stack.id, RunType(command.type), command.commit)
    # Numbered as it is written (services/transitions.py): the number is the queue's order.
    run = Run(
        id=new_id(),
        org_id=stack.org_id,
        stack_id=stack.id,
        type=command.type,
        created_by_id=actor.user_id if actor else None,
        trigger_kind=trigger.kind
        if trigger
        else TriggerKind.CLI
        if configuration_version
        else TriggerKind.MANUAL,
        trigger_commit=trigger.commit if trigger else command.commit,
        # A CLI run's configuration version stands where a push run's delivery does.
        trigger_delivery=trigger.delivery if trigger else configuration_version,
        trigger_actor=trigger.by if trigger else None,
        trigger_upstream_run_id=trigger.upstream_run if trigger else None,
        proposed=trigger is not None and trigger.kind is TriggerKind.PULL_REQUEST,
        trigger_pull_request=trigger.pull_request if trigger else None,
        pull_request_id=trigger.pull_request_id if trigger else None,
        acknowledged=[],
        variables_used=[],
        state_backends=[],
    )
    run = await change_status(
        unit, run, INITIAL, actor=actor.email if actor else trigger.by if trigger else None
    )
    details: dict[str, object] = {"number": run.number, "type": RunType(command.type).value}
    if trigger is not None:
        details |= {"trigger": trigger.kind.value, "by": trigger.by, "commit": trigger.commit}
    elif command.commit is not None:
        details |= {"commit": command.commit}
    if configuration_version is not None:
        details |= {"trigger": TriggerKind.CLI.value, "configuration_version": configuration_version}
    await audit.record(
        unit.session,
        stack,
        AuditAction.RUN_START,
        f"run:{run.id}",
        details,
        actor=actor,
        by_system=actor is None,
    )
    return run_record(run)


async def _check_known_commit(session: AsyncSession, stack_id: str, run_type: RunType, commit: str) -> None:
    """A run at a given commit re-runs one the stack has seen (a run planned it, or a push named it):
    refused with a sentence here, rather than failing at checkout minutes later."""
    if run_type == RunType.DRIFT:
        raise InvalidRequest(
            "A drift run checks the commit last applied; 'commit' cannot be given for it.", field="commit"
        )
    known = await session.scalar(
        select(Run.id)
        .where(Run.stack_id == stack_id, or_(Run.commit_sha == commit, Run.trigger_commit == commit))
        .limit(1)
    )
    if known is None:
        raise InvalidRequest(
            f"No run of this stack used commit {commit[:12]}: a run can be started at a commit an earlier "
            "run of the stack planned.",
            field="commit",
        )


async def _record(unit: Unit, actor: Actor, run: Run, action: AuditAction, **details: object) -> None:
    stack = await unit.session.get(Stack, run.stack_id)
    assert stack is not None
    await audit.record(
        unit.session, stack, action, f"run:{run.id}", {"number": run.number, **details}, actor=actor
    )


def _commented(comment: str | None) -> dict[str, str]:
    """An audit entry's `comment` detail: only when one was given."""
    return {"comment": comment} if comment else {}


async def _run_to_decide_on(session: AsyncSession, org: OrganizationRecord, run_id: str) -> Run:
    """The run, its row locked while a decision on it is taken."""
    query = select(Run).where(Run.id == run_id, Run.org_id == org.id).with_for_update()
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


async def approve_run(
    unit: Unit, actor: Actor, org: OrganizationRecord, run_id: str, command: ApproveRun
) -> RunRecord:
    run = await _run_to_decide_on(unit.session, org, run_id)
    if run.proposed:
        raise ProposedRun(
            f"Run {run.id} is a pull request's proposed run: it only plans and is never applied. "
            "Merge the pull request; the stack's trigger plans the merged commit."
        )
    if run.status != RunStatus.AWAITING_APPROVAL:
        raise InvalidStatus(
            f"Run {run.id} is {run.status}; only a run awaiting approval can be approved.", status=run.status
        )
    await require_approver(unit.session, run, actor.user_id, actor.email, approving=True)
    destructive = await destructive_addresses(unit.session, run.id)
    acknowledged = set(command.acknowledged)
    if run.confirm_destructive:
        missing = [address for address in destructive if address not in acknowledged]
        if missing:
            raise AcknowledgementRequired(missing)
    confirmed = [address for address in destructive if address in acknowledged]
    if run.approvals_required and run.approvals_required > 1:
        # A run its approval policies give a number of approvals to: each is recorded, and the
        # run waits until the last one.
        given: dict[str, Any] = {"by": actor.email, "at": utcnow().isoformat()}
        if command.comment:
            given["comment"] = command.comment
        approvals = [*(run.approvals or []), given]
        run.approvals = approvals
        progress = approvals_text(len(approvals), run.approvals_required)
        if len(approvals) < run.approvals_required:
            run.updated_at = utcnow()
            await unit.session.flush()
            await _record(
                unit,
                actor,
                run,
                AuditAction.RUN_APPROVE,
                acknowledged=confirmed,
                approvals=progress,
                **_commented(command.comment),
            )
            unit.publish_after_commit(run_channel(run.id), RunUpdated(run_id=run.id))
            return run_record(run)
    else:
        progress = None
    run = await change_status(
        unit,
        run,
        RunStatus.APPLY_QUEUED,
        actor=actor.email,
        approved_by_id=actor.user_id,
        approved_at=utcnow(),
        acknowledged=confirmed,
        # The deciding approval's comment; it is on the run before its notifications are written.
        comment=command.comment,
    )
    await _record(
        unit,
        actor,
        run,
        AuditAction.RUN_APPROVE,
        acknowledged=confirmed,
        **({"approvals": progress} if progress else {}),
        **_commented(command.comment),
    )
    return run_record(run)


async def discard_run(
    unit: Unit, actor: Actor, org: OrganizationRecord, run_id: str, command: DiscardRun
) -> RunRecord:
    run = await _run_to_decide_on(unit.session, org, run_id)
    if run.status != RunStatus.AWAITING_APPROVAL:
        raise InvalidStatus(
            f"Run {run.id} is {run.status}; only a run awaiting approval can be discarded.", status=run.status
        )
    await require_approver(unit.session, run, actor.user_id, actor.email, approving=False)
    run = await change_status(
        unit, run, RunStatus.DISCARDED, actor=actor.email, ended_by=actor.email, comment=command.comment
    )
    await _record(unit, actor, run, AuditAction.RUN_DISCARD, **_commented(command.comment))
    return run_record(run)


async def cancel_run(
    unit: Unit, actor: Actor, org: OrganizationRecord, run_id: str, command: CancelRun
) -> RunRecord:
    run = await _run_to_decide_on(unit.session, org, run_id)
    if run.status not in CANCELABLE:
        raise InvalidStatus(_why_not_cancelable(run), status=run.status)
    previous = run.status
    run = await change_status(unit, run, RunStatus.CANCELED, actor=actor.email, ended_by=actor.email)
    await _record(unit, actor, run, AuditAction.RUN_CANCEL, was=RunStatus(previous).value)
    return run_record(run)


def _why_not_cancelable(run: Run) -> str:
    """One sentence: the run's status, what can be canceled, and what to do instead."""
    only = "only a queued or apply_queued run can be canceled"
    if run.status == RunStatus.AWAITING_APPROVAL:
        return f"Run {run.id} is {run.status}; {only}, so discard it instead."
    if run.status in RUNNING:
        return (
            f"Run {run.id} is {run.status}; {only}, because stopping a running phase can corrupt the state."
        )
    return f"Run {run.id} is {run.status}; {only}, and this one has already finished."
