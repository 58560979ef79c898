"""An organization's policies: created, changed and deleted by admins, each change audited. A
module is compiled before it is stored: one that does not compile is refused (422, with the
line and column) and nothing is written."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Policy
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import AlreadyExists, InvalidRequest, NotFound
from firstlume.domain.policies import RULES, PolicyKind
from firstlume.services import audit
from firstlume.services.commands import CreatePolicy, UpdatePolicy
from firstlume.services.policies.engine import engine


@dataclass(frozen=True)
class PolicyRecord:
    id: str
    org_id: str
    name: str
    kind: PolicyKind
    description: str
    rego: str
    created_at: datetime
    updated_at: datetime


def _record(row: Policy) -> PolicyRecord:
    return PolicyRecord(
        row.id,
        row.org_id,
        row.name,
        PolicyKind(row.kind),
        row.description,
        row.rego,
        row.created_at,
        row.updated_at,
    )


async def compiled(name: str, kind: PolicyKind, rego: str) -> list[str]:
    """Compiles the module (on a thread: a large one takes a few milliseconds); refuses one that
    does not compile, or that defines none of its kind's rules."""
    rules = RULES[kind]
    defined = await asyncio.to_thread(engine().compile, name, rego, rules)
    if not defined:
        raise InvalidRequest(
            f"A {kind.value} policy defines {' or '.join(rules)} (in any package); this module defines neither.",
            field="rego",
        )
    return defined


async def list_policies(
    session: AsyncSession, org_id: str, names: Sequence[str] | None = None
) -> list[PolicyRecord]:
    query = select(Policy).where(Policy.org_id == org_id).order_by(Policy.name)
    if names is not None:
        query = query.where(Policy.name.in_(list(names)))
    return [_record(row) for row in await session.scalars(query)]


async def _row(session: AsyncSession, org_id: str, name: str) -> Policy:
    row = await session.scalar(select(Policy).where(Policy.org_id == org_id, Policy.name == name))
    if row is None:
        raise NotFound(f"No policy '{name}' in this organization.")
    return row


async def get_policy(session: AsyncSession, org_id: str, name: str) -> PolicyRecord:
    return _record(await _row(session, org_id, name))


async def create_policy(session: AsyncSession, org_id: str, command: CreatePolicy) -> PolicyRecord:
    kind = PolicyKind(command.kind)
    await compiled(command.name, kind, command.rego)
    if await session.scalar(select(Policy.id).where(Policy.org_id == org_id, Policy.name == command.name)):
        raise AlreadyExists(f"A policy named '{command.name}' already exists; change it with PUT.")
    row = Policy(
        org_id=org_id, name=command.name, kind=kind.value, description=command.description, rego=command.rego
    )
    session.add(row)
    await session.flush()
    await audit.record(
        session, org_id, AuditAction.POLICY_CREATE, f"policy:{row.name}", {"name": row.name, "kind": row.kind}
    )
    return _record(row)


async def update_policy(session: AsyncSession, org_id: str, name: str, command: UpdatePolicy) -> PolicyRecord:
    row = await _row(session, org_id, name)
    changed: list[str] = []
    if command.rego is not None and command.rego != row.rego:
        await compiled(row.name, PolicyKind(row.kind), command.rego)
        row.rego = command.rego
        changed.append("rego")
    if command.description is not None and command.description != row.description:
        row.description = command.description
        changed.append("description")
    if changed:
        row.updated_at = utcnow()
        await session.flush()
        await audit.record(
            session,
            org_id,
            AuditAction.POLICY_UPDATE,
            f"policy:{row.name}",
            {"name": row.name, "changed": changed},
        )
    return _record(row)


async def delete_policy(session: AsyncSession, org_id: str, name: str) -> None:
    """Deletes the policy. A `policies` setting that still names it fails its stacks' plans
    (fail closed) until the setting is changed: a guardrail never disappears silently."""
    row = await _row(session, org_id, name)
    await session.execute(delete(Policy).where(Policy.id == row.id))
    await audit.record(session, org_id, AuditAction.POLICY_DELETE, f"policy:{name}", {"name": name})
