"""Settings and variables at organization, folder and stack level, and how they resolve."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.db.models import Folder, Membership, Organization, Policy, Stack, User, Variable
from firstlume.db.types import utcnow
from firstlume.domain.audit import SECRET_SETTINGS, AuditAction
from firstlume.domain.errors import InvalidRequest, NotFound
from firstlume.domain.inheritance import Level, Resolved, resolve_variables
from firstlume.services import audit
from firstlume.services.catalog import folder_chain
from firstlume.services.commands import PatchSettings, PutVariable
from firstlume.services.reads import settings as setting_reads
from firstlume.services.reads.catalog import FolderRecord, OrganizationRecord, StackRecord, stack_record
from firstlume.services.reads.settings import (
    Scope,
    VariableRecord,
    org_id_of,
    scope_name,
    variable_record,
)

_TABLES: dict[type[Any], type[Organization | Folder | Stack]] = {
    OrganizationRecord: Organization,
    FolderRecord: Folder,
    StackRecord: Stack,
}


async def effective_settings(session: AsyncSession, scope: Scope | Stack) -> dict[str, Resolved]:
    """One scope's settings, resolved by the read layer's batch read."""
    [resolved] = await setting_reads.effective_settings(
        session, [stack_record(scope) if isinstance(scope, Stack) else scope]
    )
    return resolved


def scope_target(scope: Scope) -> str:
    """The scope as the audit trail names it: "organization:acme", "folder:prod/eu", "stack:net"."""
    if isinstance(scope, OrganizationRecord):
        return f"organization:{scope.slug}"
    if isinstance(scope, FolderRecord):
        return f"folder:{scope.path}"
    return f"stack:{scope.slug}"


def _audit_stack(scope: Scope) -> str | None:
    return scope.slug if isinstance(scope, StackRecord) else None


async def patch_settings(session: AsyncSession, scope: Scope, command: PatchSettings) -> Scope:
    """Sets the given settings at this level, and records which changed (with their old and new
    values, but for secret ones). Returns the scope as changed."""
    changes = {name: value for name, value in command.changes().items() if getattr(scope, name) != value}
    if not changes:
        return scope
    if changes.get("approvers"):
        await _refuse_outsiders(session, org_id_of(scope), changes["approvers"])
    if changes.get("policies"):
        await _refuse_unknown_policies(session, org_id_of(scope), changes["policies"])
    table = _TABLES[type(scope)]
    await session.execute(update(table).where(table.id == scope.id).values(**changes))
    changed = [
        {"setting": name}
        if name in SECRET_SETTINGS
        else {"setting": name, "old": getattr(scope, name), "new": value}
        for name, value in changes.items()
    ]
    await audit.record(
        session,
        org_id_of(scope),
        AuditAction.SETTINGS_UPDATE,
        scope_target(scope),
        {"changes": changed},
        stack=_audit_stack(scope),
    )
    return replace(scope, **changes)


async def _refuse_outsiders(session: AsyncSession, org_id: str, approvers: list[str]) -> None:
    """Approvers who are not members of the organization could never approve, so every run
    awaiting approval would wait for ever: refused, naming them."""
    wanted = {p.partition(":")[2].lower(): p for p in approvers if p.startswith("user:")}
    if not wanted:
        return
    members = await session.scalars(
        select(func.lower(User.email))
        .join(Membership, Membership.user_id == User.id)
        .where(Membership.org_id == org_id, func.lower(User.email).in_(list(wanted)))
    )
    outsiders = [wanted[email] for email in wanted.keys() - set(members)]
    if outsiders:
        outsiders.sort()
        names = ", ".join(p.partition(":")[2] for p in outsiders)
        raise InvalidRequest(
            f"'approvers' may name members of this organization only; not members: {names}. "
            "Add them as members first (PUT /members/<email>), or name a group.",
            field="approvers",
            not_members=outsiders,
        )


async def _refuse_unknown_policies(session: AsyncSession, org_id: str, names: list[str]) -> None:
    """A setting naming a policy that does not exist would fail every plan: refused, naming it."""
    known = set(
        await session.scalars(select(Policy.name).where(Policy.org_id == org_id, Policy.name.in_(names)))
    )
    unknown = [name for name in names if name not in known]
    if unknown:
        raise InvalidRequest(
            f"'policies' may name this organization's policies only; no policy named {', '.join(unknown)}. "
            "Create them first (POST /policies).",
            field="policies",
            unknown=unknown,
        )


# Variables -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VariableValue:
    name: str
    value: Any  # a string, or the JSON value of a variable set as one
    sensitive: bool
    kind: str
    origin: str


def _variable_context(org_id: str, scope: str, scope_id: str, name: str) -> str:
    return f"variable:{org_id}:{scope}:{scope_id}:{name}"


async def put_variable(
    session: AsyncSession, keyring: KeyRing, scope: Scope, command: PutVariable
) -> VariableRecord:
    name = command.name
    org_id = org_id_of(scope)
    scope_label = scope_name(scope)
    variable = await session.scalar(
        select(Variable).where(
            Variable.org_id == org_id,
            Variable.scope == scope_label,
            Variable.scope_id == scope.id,
            Variable.name == name,
        )
    )
    created = variable is None
    if variable is None:
        variable = Variable(org_id=org_id, scope=scope_label, scope_id=scope.id, name=name)
        session.add(variable)
    variable.kind = command.kind.value
    variable.sensitive = command.sensitive
    variable.value_json = not isinstance(command.value, str)
    variable.value_sealed = keyring.encrypt_text(
        command.value_text(), _variable_context(org_id, scope_label, scope.id, name)
    )
    variable.updated_at = utcnow()
    await session.flush()
    # The name, never the value (sensitive or not).
    await audit.record(
        session,
        org_id,
        AuditAction.VARIABLE_SET,
        f"variable:{name}",
        {
            "name": name,
            "scope": scope_target(scope),
            "kind": variable.kind,
            "sensitive": variable.sensitive,
            "created": created,
        },
        stack=_audit_stack(scope),
    )
    return variable_record(variable)


async def delete_variable(session: AsyncSession, scope: Scope, name: str) -> None:
    org_id = org_id_of(scope)
    result = await session.execute(
        delete(Variable).where(
            Variable.org_id == org_id,
            Variable.scope == scope_name(scope),
            Variable.scope_id == scope.id,
            Variable.name == name,
        )
    )
    if result.rowcount == 0:  # type: ignore[attr-defined]
        raise NotFound(f"No variable '{name}' here.")
    await audit.record(
        session,
        org_id,
        AuditAction.VARIABLE_DELETE,
        f"variable:{name}",
        {"name": name, "scope": scope_target(scope)},
        stack=_audit_stack(scope),
    )


def reveal(keyring: KeyRing, variable: VariableRecord | Variable) -> str:
    return keyring.decrypt_text(
        variable.value_sealed,
        _variable_context(variable.org_id, variable.scope, variable.scope_id, variable.name),
    )


def revealed_value(keyring: KeyRing, variable: VariableRecord | Variable) -> Any:
    """The value as it was set: a string, or the number, boolean, list or object it was."""
    text = reveal(keyring, variable)
    return json.loads(text) if variable.value_json else text


def _typed(variable: Variable, text: str) -> Any:
    return json.loads(text) if variable.value_json else text


async def effective_variables(session: AsyncSession, keyring: KeyRing, stack: Stack) -> list[VariableValue]:
    """The stack's variables with values, nearest level winning. Only executors may see values."""
    org_id = stack.org_id
    folders = await folder_chain(session, stack.folder_id)
    scope_ids = [org_id, *(f.id for f in folders), stack.id]
    rows = list(
        await session.scalars(
            select(Variable).where(Variable.org_id == org_id, Variable.scope_id.in_(scope_ids))
        )
    )
    by_scope: dict[str, dict[str, Variable]] = {}
    for row in rows:
        by_scope.setdefault(row.scope_id, {})[row.name] = row
    levels = [
        Level("organization", by_scope.get(org_id, {})),
        *(Level(f"folder:{f.path}", by_scope.get(f.id, {})) for f in folders),
        Level("stack", by_scope.get(stack.id, {})),
    ]
    resolved = resolve_variables(levels)
    return [
        VariableValue(
            name=name,
            value=_typed(item.value, reveal(keyring, item.value)),
            sensitive=item.value.sensitive,
            kind=item.value.kind,
            origin=item.origin,
        )
        for name, item in sorted(resolved.items())
    ]
