"""Policies at the end of a plan: the input each policy sees, and their checks.

The input (adoption-api.md section 8) is `{"plan", "run", "stack", "changes"}`: the plan as
`terraform show -json` printed it with every sensitive value "(sensitive)" (domain/changes.py's
scrubbing, which also masks any value equal to one Firstlume holds as sensitive), the run, the
stack and the grouped changes as the changes API lists them (already masked). The evaluation
itself happens outside any transaction (services/phases.py): a slow policy holds no lock.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Folder, PlanArtifact, ResourceChange, Run, Stack, User
from firstlume.domain.changes import GROUPS, scrubbed_plan
from firstlume.domain.inheritance import Resolved
from firstlume.domain.policies import (
    DEFAULT_TIME_LIMIT_S,
    RULES,
    PolicyCheck,
    PolicyKind,
    check_of,
    failed_check,
)
from firstlume.services.context import Context
from firstlume.services.inherited import effective_settings, effective_variables
from firstlume.services.policies.engine import PolicySource, engine
from firstlume.services.policies.store import PolicyRecord, list_policies
from firstlume.services.sealed_plan import open_plan_json, plan_context


@dataclass(frozen=True)
class PlanEndPolicies:
    """What a run records of its policies when its plan finishes."""

    names: list[str]
    origin: str
    checks: list[PolicyCheck]


def _scrub(plan: dict[str, Any], secrets: list[Any]) -> dict[str, Any]:
    units = plan.get("terragrunt_units")
    if isinstance(units, dict):
        return {**plan, "terragrunt_units": {k: scrubbed_plan(v, secrets) for k, v in units.items()}}
    return scrubbed_plan(plan, secrets)


async def _secrets(ctx: Context, session: AsyncSession, run: Run, variables_sealed: bytes) -> list[Any]:
    """The values Firstlume holds as sensitive: as the plan used them, and as they are now."""
    used = json.loads(ctx.keyring.decrypt_text(variables_sealed, plan_context(run.id, "variables")))
    values = [v.get("value") for v in used if v.get("sensitive")]
    stack = await session.get(Stack, run.stack_id)
    if stack is not None:
        values += [v.value for v in await effective_variables(session, ctx.keyring, stack) if v.sensitive]
    return values


async def _changes(session: AsyncSession, run_id: str) -> dict[str, Any]:
    rows = await session.execute(
        select(
            ResourceChange.address,
            ResourceChange.type,
            ResourceChange.unit,
            ResourceChange.action,
            ResourceChange.attributes,
            ResourceChange.replaced_because,
        )
        .where(ResourceChange.run_id == run_id)
        .order_by(ResourceChange.position)
    )
    by_action: dict[str, list[dict[str, Any]]] = {action: [] for action, _ in GROUPS}
    for address, kind, unit, action, attributes, replaced_because in rows:
        change = {"address": address, "type": kind, "unit": unit, "action": action, "attributes": attributes}
        if action == "replace":
            change["replaced_because"] = replaced_because
        by_action.setdefault(action, []).append(change)
    return {
        "summary": {action: len(items) for action, items in by_action.items()},
        "groups": [
            {"action": action, "title": title, "changes": by_action[action]} for action, title in GROUPS
        ],
    }


async def policy_input(ctx: Context, session: AsyncSession, run: Run) -> dict[str, Any]:
    """The document every policy of this run sees; it never holds a sensitive value."""
    # The sealed parts are deferred columns: read by name.
    artifact = (
        await session.execute(
            select(PlanArtifact.plan_json_sealed, PlanArtifact.variables_sealed).where(
                PlanArtifact.run_id == run.id
            )
        )
    ).first()
    plan: dict[str, Any] = {}
    secrets: list[Any] = []
    if artifact is not None:
        plan_json_sealed, variables_sealed = artifact
        text = open_plan_json(ctx.keyring, run.id, plan_json_sealed)
        secrets = await _secrets(ctx, session, run, variables_sealed)
        plan = await asyncio.to_thread(lambda: _scrub(json.loads(text), secrets))
    stack = await session.get(Stack, run.stack_id)
    folder = await session.get(Folder, stack.folder_id) if stack is not None and stack.folder_id else None
    creator = await session.get(User, run.created_by_id) if run.created_by_id else None
    return {
        "plan": plan,
        "run": {
            "id": run.id,
            "type": str(run.type),
            # Proposed runs (pull requests) plan and never apply; runs of a branch are tracked.
            "proposed": False,
            "trigger": str(run.trigger_kind),
            "created_by": creator.email if creator is not None else run.trigger_actor,
            "commit": run.commit_sha,
        },
        "stack": {
            "slug": stack.slug if stack is not None else None,
            "folder": folder.path if folder is not None else None,
            "labels": [],
        },
        "changes": await _changes(session, run.id),
    }


def _sources(policies: list[PolicyRecord]) -> list[PolicySource]:
    return [PolicySource(p.name, p.rego, RULES[p.kind]) for p in policies]


async def evaluate(
    policies: list[PolicyRecord], document: dict[str, Any], time_limit_s: float = DEFAULT_TIME_LIMIT_S
) -> list[PolicyCheck]:
    """Each policy's check on `document`; one that errs or times out denies (fail closed)."""
    input_json = await asyncio.to_thread(lambda: json.dumps(document).encode())
    outcomes = await engine().evaluate(_sources(policies), input_json, time_limit_s)
    checks: list[PolicyCheck] = []
    for policy, outcome in zip(policies, outcomes, strict=True):
        if outcome.rules is None:
            checks.append(
                failed_check(
                    policy.name,
                    policy.kind,
                    f"policy {policy.name} {_reason(outcome.error)}",
                    outcome.took_ms,
                )
            )
        else:
            checks.append(check_of(policy.name, policy.kind, outcome.rules, outcome.took_ms))
    return checks


def _reason(error: str | None) -> str:
    if not error:
        return "failed, and the engine gave no reason"
    return error if error.startswith(("timed out", "not evaluated")) else f"failed: {error}"


async def plan_end_policies(
    ctx: Context, run_id: str, time_limit_s: float = DEFAULT_TIME_LIMIT_S
) -> PlanEndPolicies:
    """Reads the run's `policies` setting and its input in one read, then evaluates them with
    no transaction open. A named policy that no longer exists denies (fail closed)."""
    async with ctx.db.read() as session:
        run = await session.get(Run, run_id)
        stack = await session.get(Stack, run.stack_id) if run is not None else None
        if run is None or stack is None:
            return PlanEndPolicies([], "default", [])
        setting: Resolved = (await effective_settings(session, stack))["policies"]
        names = list(setting.value or [])
        if not names:
            return PlanEndPolicies([], setting.origin, [])
        found = {p.name: p for p in await list_policies(session, run.org_id, names)}
        document = await policy_input(ctx, session, run)
    missing = [
        failed_check(
            name,
            PolicyKind.PLAN,
            f"policy {name} does not exist (named by the policies setting, {setting.origin})",
            0,
        )
        for name in names
        if name not in found
    ]
    checks = await evaluate([found[n] for n in names if n in found], document, time_limit_s)
    return PlanEndPolicies(names, setting.origin, checks + missing)
