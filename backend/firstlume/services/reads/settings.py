"""Reads of inherited settings and variables for many scopes at once (an organization, a folder
or a stack, as their read models), and what a scope is: the settings it sets itself, its name
in the audit trail and in the variables table."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Folder, Organization, Variable
from firstlume.domain.inheritance import SETTING_NAMES, Resolved, levels_outermost_first, resolve_settings
from firstlume.services.catalog import path_prefixes
from firstlume.services.reads.catalog import (
    FOLDER_COLUMNS,
    ORG_COLUMNS,
    FolderRecord,
    OrganizationRecord,
    StackRecord,
)
from firstlume.services.reads.rows import column_rows, columns_of, record_of

Scope = OrganizationRecord | FolderRecord | StackRecord


@dataclass(frozen=True, slots=True)
class VariableRecord:
    """A variable set at one level. Its value is sealed as stored: services/inherited.py reveals
    it (never a sensitive one's) for those who may read it."""

    org_id: str
    scope: str
    scope_id: str
    name: str
    kind: str
    sensitive: bool
    value_sealed: bytes
    value_json: bool
    updated_at: datetime


VARIABLE_COLUMNS = columns_of(VariableRecord, cast(Table, Variable.__table__))


def variable_record(variable: Variable) -> VariableRecord:
    return record_of(VariableRecord, variable)


def scope_name(scope: Scope) -> str:
    return _NAMES[type(scope)]


_NAMES: dict[type[Any], str] = {
    OrganizationRecord: "organization",
    FolderRecord: "folder",
    StackRecord: "stack",
}


def scope_key(scope: Scope) -> tuple[str, str]:
    return scope_name(scope), scope.id


def org_id_of(scope: Scope) -> str:
    return scope.id if isinstance(scope, OrganizationRecord) else scope.org_id


def explicit_settings(scope: Scope) -> dict[str, Any]:
    """The settings the scope sets itself (null: inherited)."""
    return {name: getattr(scope, name) for name in SETTING_NAMES}


async def effective_settings(session: AsyncSession, scopes: Sequence[Scope]) -> list[dict[str, Resolved]]:
    """The organizations and every folder on the scopes' paths are read in three statements at most."""
    orgs = {s.id: s for s in scopes if isinstance(s, OrganizationRecord)}
    wanted_orgs = {s.org_id for s in scopes if not isinstance(s, OrganizationRecord)} - orgs.keys()
    if wanted_orgs:
        rows = await column_rows(session, select(*ORG_COLUMNS).where(Organization.id.in_(wanted_orgs)))
        orgs.update((row[0], OrganizationRecord(*row)) for row in rows)
    innermost = await _innermost_folders(session, scopes)
    chains = await _folder_chains(session, list(innermost.values()))
    results = []
    for scope in scopes:
        org = orgs[org_id_of(scope)]
        folder = innermost.get(scope_key(scope))
        chain = chains.get(folder.id, []) if folder else []
        levels = levels_outermost_first(
            explicit_settings(org),
            [(f.path, explicit_settings(f)) for f in chain],
            explicit_settings(scope) if isinstance(scope, StackRecord) else None,
        )
        results.append(resolve_settings(levels))
    return results


async def _folders(session: AsyncSession, *where: Any) -> list[FolderRecord]:
    return [FolderRecord(*row) for row in await column_rows(session, select(*FOLDER_COLUMNS).where(*where))]


async def _innermost_folders(
    session: AsyncSession, scopes: Sequence[Scope]
) -> dict[tuple[str, str], FolderRecord]:
    innermost: dict[tuple[str, str], FolderRecord] = {
        scope_key(s): s for s in scopes if isinstance(s, FolderRecord)
    }
    stack_folders = {s.folder_id for s in scopes if isinstance(s, StackRecord) and s.folder_id}
    if stack_folders:
        by_id = {f.id: f for f in await _folders(session, Folder.id.in_(stack_folders))}
        for s in scopes:
            if isinstance(s, StackRecord) and s.folder_id in by_id:
                innermost[scope_key(s)] = by_id[s.folder_id]
    return innermost


async def _folder_chains(session: AsyncSession, folders: list[FolderRecord]) -> dict[str, list[FolderRecord]]:
    """Each folder's chain, outermost first."""
    if not folders:
        return {}
    prefixes = {p for f in folders for p in path_prefixes(f.path)}
    org_ids = {f.org_id for f in folders}
    rows = {
        (f.org_id, f.path): f
        for f in await _folders(session, Folder.org_id.in_(org_ids), Folder.path.in_(prefixes))
    }
    return {
        f.id: [rows[(f.org_id, p)] for p in path_prefixes(f.path) if (f.org_id, p) in rows] for f in folders
    }


async def variables(session: AsyncSession, scopes: Sequence[Scope]) -> list[list[VariableRecord]]:
    """Each scope's own variables, by name."""
    rows = await column_rows(
        session,
        select(*VARIABLE_COLUMNS)
        .where(Variable.scope_id.in_({s.id for s in scopes}))
        .order_by(Variable.name),
    )
    grouped: dict[tuple[str, str], list[VariableRecord]] = defaultdict(list)
    for row in rows:
        variable = VariableRecord(*row)
        grouped[(variable.scope, variable.scope_id)].append(variable)
    return [[v for v in grouped.get(scope_key(s), []) if v.org_id == org_id_of(s)] for s in scopes]
