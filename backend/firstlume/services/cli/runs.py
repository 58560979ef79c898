"""Runs the CLI starts: `terraform plan` is a plan run, `terraform apply` an apply run (a
destroy run with -destroy) whose "yes" is its approval, unless `-auto-approve` says it needs
none. Whatever the stack's own rules require (confirm destructive changes, named approvers)
still holds: such a run is not confirmable from the CLI, and waits for its approval here."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Run
from firstlume.db.models_cli import CliRun, ConfigurationVersion
from firstlume.domain.errors import Conflict
from firstlume.domain.runs import RunStatus, RunType
from firstlume.services import runs
from firstlume.services.cli.configuration_versions import UPLOADED
from firstlume.services.commands import ApproveRun, StartRun
from firstlume.services.context import Actor, Unit
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord
from firstlume.services.reads.runs import RunRecord


def run_type(*, speculative: bool, destroy: bool) -> RunType:
    if speculative:
        return RunType.PLAN
    return RunType.DESTROY if destroy else RunType.APPLY


async def start(
    unit: Unit,
    actor: Actor,
    stack: StackRecord,
    version: ConfigurationVersion,
    *,
    destroy: bool,
    auto_apply: bool,
    message: str | None,
) -> RunRecord:
    if version.status != UPLOADED:
        raise Conflict(
            f"The configuration version {version.id} is {version.status}: upload its code before starting a run."
        )
    kind = run_type(speculative=version.speculative, destroy=destroy)
    run = await runs.start_run(unit, actor, stack, StartRun(type=kind), configuration_version=version.id)
    unit.session.add(
        CliRun(run_id=run.id, configuration_version_id=version.id, auto_apply=auto_apply, message=message)
    )
    await unit.session.flush()
    return run


async def cli_run(session: AsyncSession, run_id: str) -> CliRun | None:
    return await session.get(CliRun, run_id)


def approval_in_firstlume(run: RunRecord | Run, destructive: int) -> bool:
    """Whether the run's approval is one the CLI's "yes" cannot give: destructive changes the
    stack wants confirmed one by one, named approvers, or no self-approval (the rules recorded
    when its plan finished)."""
    if not run.approval_required:
        return False
    return bool((run.confirm_destructive and destructive) or run.approvers or run.forbid_self_approval)


def needs_firstlume_approval(run: RunRecord | Run, destructive: int) -> bool:
    """Whether the run waits, now, for such an approval."""
    return run.status == RunStatus.AWAITING_APPROVAL and approval_in_firstlume(run, destructive)


APPROVED = frozenset({RunStatus.APPLY_QUEUED, RunStatus.APPLYING, RunStatus.APPLIED})


def confirmable(run: RunRecord | Run, destructive: int, *, cli_confirms: bool) -> bool:
    """Whether the CLI may confirm the run: it waits for approval and its "yes" is enough; or it
    was approved in Firstlume while the CLI waited (its "yes" then only goes on to the apply)."""
    if run.status == RunStatus.AWAITING_APPROVAL:
        return not needs_firstlume_approval(run, destructive)
    return cli_confirms and run.approved_at is not None and run.status in APPROVED


async def apply(unit: Unit, actor: Actor, org: OrganizationRecord, run: RunRecord) -> None:
    """The CLI's "yes": the run's approval, with nothing acknowledged; nothing more when the run
    was approved in Firstlume meanwhile."""
    if run.status in APPROVED and run.approved_at is not None:
        return
    await runs.approve_run(unit, actor, org, run.id, ApproveRun())
