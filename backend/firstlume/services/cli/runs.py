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


def confirmable(run: RunRecord | Run, destructive: int) -> bool:
    """Whether the CLI's "yes" is enough to approve the run: it waits for approval, and no rule
    of the stack asks for more (destructive changes confirmed one by one, named approvers)."""
    if run.status != RunStatus.AWAITING_APPROVAL:
        return False
    if run.confirm_destructive and destructive:
        return False
    return not run.approvers


async def apply(unit: Unit, actor: Actor, org: OrganizationRecord, run_id: str) -> RunRecord:
    """The CLI's "yes": the run's approval, with nothing acknowledged."""
    return await runs.approve_run(unit, actor, org, run_id, ApproveRun())
