"""What a drift run compares the infrastructure with: the stack's last successful apply.

A drift run answers "does what exists still match what was applied?". Planning the branch's tip
would also list every commit not applied yet as drift, so it plans the commit of the stack's last
`applied` run, with the Terraform variables that apply used (its sealed plan variables); the
environment variables are the current ones, because they carry credentials, which rotate. A stack
with no successful apply (or whose last one was a destroy) has nothing that is supposed to exist:
its drift run fails with that reason before Terraform starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Run
from firstlume.domain.errors import Conflict
from firstlume.domain.runs import RunStatus, RunType


class NoDriftBase(Conflict):
    code = "no_applied_run"


@dataclass(frozen=True)
class DriftBase:
    run_id: str
    number: int
    commit_sha: str


def no_base_reason(stack_slug: str) -> str:
    return (
        f"Stack '{stack_slug}' has no successful apply yet: a drift run compares the infrastructure "
        "with what the last apply made, so there is nothing to compare. Apply the stack first."
    )


def destroyed_reason(number: int) -> str:
    return (
        f"The stack's last successful apply (run #{number}) destroyed its resources: nothing is "
        "supposed to exist, so there is nothing to compare. Apply the stack first."
    )


async def drift_base(session: AsyncSession, run: Run, stack_slug: str) -> DriftBase:
    """The apply `run` (a drift run) compares with, or NoDriftBase with the reason."""
    last = (
        await session.execute(
            select(Run.id, Run.number, Run.type, Run.commit_sha)
            .where(
                Run.stack_id == run.stack_id,
                Run.status == RunStatus.APPLIED.value,
                Run.type.in_([RunType.APPLY.value, RunType.DESTROY.value]),
            )
            .order_by(Run.finished_at.desc(), Run.number.desc())
            .limit(1)
        )
    ).first()
    if last is None or last.commit_sha is None:
        raise NoDriftBase(no_base_reason(stack_slug))
    if last.type == RunType.DESTROY:
        raise NoDriftBase(destroyed_reason(last.number))
    return DriftBase(run_id=last.id, number=last.number, commit_sha=last.commit_sha)
