"""Who may approve or discard a run awaiting approval: an operator or admin who is among the
run's `approvers` (by "user:<email>" or "group:<name>"; null: any), and, with
`forbid_self_approval`, not the person who started it nor, for a push, the commit's author.
The rules are those the run recorded when its plan finished, with their origins."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Membership, Run
from firstlume.domain.errors import Conflict, FirstlumeError, Forbidden
from firstlume.domain.inheritance import Resolved
from firstlume.domain.policies import PolicyCheck, approval_rules
from firstlume.domain.runs import RunStatus, TriggerKind
from firstlume.services.access.folder_grants import raised_on_stack
from firstlume.services.access.roles import Role
from firstlume.services.reads.runs import RunRecord


class NotAnApprover(Forbidden):
    code = "not_an_approver"


class SelfApprovalForbidden(Forbidden):
    code = "self_approval_forbidden"


class AlreadyApproved(Conflict):
    code = "already_approved"


def recorded_rules(rules: dict[str, Resolved]) -> dict[str, Any]:
    """The approver rules to record on the run when its plan finishes."""
    return {
        "approvers": rules["approvers"].value,
        "approvers_origin": rules["approvers"].origin,
        "forbid_self_approval": bool(rules["forbid_self_approval"].value),
        "forbid_self_approval_origin": rules["forbid_self_approval"].origin,
    }


def policy_approval_rules(checks: Sequence[PolicyCheck], recorded: dict[str, Any]) -> dict[str, Any]:
    """What the approval policies add to the rules read from the settings: approval becomes
    required when a policy asks for approvals, the run needs as many as the largest number
    asked for, and only people among the approvers the policies name may decide on it."""
    added = approval_rules(checks)
    if added.approvals_required is None and added.approvers is None:
        return {}
    rules: dict[str, Any] = {
        "approvals_required": added.approvals_required or 1,
        "policy_approvers": list(added.approvers) if added.approvers is not None else None,
        "approvals": [],
    }
    if not recorded.get("approval_required"):
        rules["approval_required"], rules["approval_required_origin"] = True, "policies"
    return rules


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str | None = None  # why not, for a person
    code: str | None = None


def _started_it(run: Run | RunRecord, user_id: str, email: str) -> str | None:
    if run.created_by_id == user_id:
        return "you started this run"
    if run.trigger_kind == TriggerKind.PUSH:
        author = (run.trigger_actor or "").removeprefix("git:")
        if author and author.lower() == email.lower():
            return "you wrote the commit that started this run"
    return None


def verdict(
    run: Run | RunRecord, email: str, user_id: str, role: str | None, groups: list[str], *, approving: bool
) -> Verdict:
    """Whether this person may approve (or discard, with approving=False) the run."""
    if role is None:
        return Verdict(False, "you are not a member of this organization", "not_found")
    if not Role(role).allows(Role.OPERATOR):
        return Verdict(False, "approving needs the operator or admin role", "forbidden")
    approvers = run.approvers
    if approvers is not None:
        mine = {f"user:{email.lower()}"} | {f"group:{g}" for g in groups}
        if not mine & {a.lower() if a.startswith("user:") else a for a in approvers}:
            where = f" ({run.approvers_origin})" if run.approvers_origin else ""
            return Verdict(
                False,
                f"only {', '.join(approvers) or 'nobody'} may decide on this run{where}",
                NotAnApprover.code,
            )
    required = run.policy_approvers
    if required:
        mine = {f"user:{email.lower()}"} | {f"group:{g}" for g in groups}
        if not mine & set(required):
            return Verdict(
                False,
                f"only {', '.join(required)} may decide on this run (its approval policies)",
                NotAnApprover.code,
            )
    if approving and any(a.get("by", "").lower() == email.lower() for a in run.approvals or []):
        return Verdict(False, "you have already approved this run", AlreadyApproved.code)
    if approving and run.forbid_self_approval:
        started = _started_it(run, user_id, email)
        if started:
            return Verdict(False, f"{started} and forbid_self_approval is on", SelfApprovalForbidden.code)
    return Verdict(True)


async def membership_of(session: AsyncSession, org_id: str, user_id: str) -> tuple[str | None, list[str]]:
    row = (
        await session.execute(
            select(Membership.role, Membership.groups).where(
                Membership.org_id == org_id, Membership.user_id == user_id
            )
        )
    ).first()
    return (str(row[0]), list(row[1] or [])) if row else (None, [])


async def viewer_verdicts(
    session: AsyncSession, run: RunRecord, user_id: str, email: str
) -> tuple[Verdict, Verdict]:
    """What the approval panel shows the viewer: may they approve, and discard, the run now, and
    if not, why."""
    if run.status != RunStatus.AWAITING_APPROVAL:
        no = Verdict(False, "the run is not awaiting approval", "invalid_status")
        return no, no
    role, groups = await membership_of(session, run.org_id, user_id)
    role = await raised_on_stack(session, run.org_id, user_id, run.stack_id, role)
    return (
        verdict(run, email, user_id, role, groups, approving=True),
        verdict(run, email, user_id, role, groups, approving=False),
    )


async def require_approver(
    session: AsyncSession, run: Run, user_id: str, email: str, *, approving: bool
) -> None:
    """Refuses (403) a decision by someone the run's rules leave out; the run is left unchanged."""
    if run.status != RunStatus.AWAITING_APPROVAL:
        return  # the status refusal says more
    role, groups = await membership_of(session, run.org_id, user_id)
    role = await raised_on_stack(session, run.org_id, user_id, run.stack_id, role)
    decided = verdict(run, email, user_id, role, groups, approving=approving)
    if decided.allowed:
        return
    error: type[FirstlumeError] = {
        SelfApprovalForbidden.code: SelfApprovalForbidden,
        AlreadyApproved.code: AlreadyApproved,
    }.get(decided.code or "", NotAnApprover)
    reason = decided.reason or ""
    raise error(f"You may not {'approve' if approving else 'discard'} this run: {reason}.", reason=reason)
