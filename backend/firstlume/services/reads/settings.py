"""Reads of inherited settings and variables for many scopes at once: inherited.effective_settings
and inherited.list_variables, batched."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Folder, Organization, Stack, Variable
from firstlume.domain.inheritance import Resolved, levels_outermost_first, resolve_settings
from firstlume.services.catalog import path_prefixes
from firstlume.services.scopes import Scope, explicit_settings, org_id_of, scope_name


def scope_key(scope: Scope) -> tuple[str, str]:
    return scope_name(scope), scope.id


async def effective_settings(session: AsyncSession, scopes: Sequence[Scope]) -> list[dict[str, Resolved]]:
    """The organizations and every folder on the scopes' paths are read in three statements at most."""
    orgs = {s.id: s for s in scopes if isinstance(s, Organization)}
    wanted_orgs = {s.org_id for s in scopes if not isinstance(s, Organization)} - orgs.keys()
    if wanted_orgs:
        orgs.update(
            {
                o.id: o
                for o in await session.scalars(select(Organization).where(Organization.id.in_(wanted_orgs)))
            }
        )
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
            explicit_settings(scope) if isinstance(scope, Stack) else None,
        )
        results.append(resolve_settings(levels))
    return results


async def _innermost_folders(session: AsyncSession, scopes: Sequence[Scope]) -> dict[tuple[str, str], Folder]:
    innermost: dict[tuple[str, str], Folder] = {scope_key(s): s for s in scopes if isinstance(s, Folder)}
    stack_folders = {s.folder_id for s in scopes if isinstance(s, Stack) and s.folder_id}
    if stack_folders:
        by_id = {f.id: f for f in await session.scalars(select(Folder).where(Folder.id.in_(stack_folders)))}
        for s in scopes:
            if isinstance(s, Stack) and s.folder_id in by_id:
                innermost[scope_key(s)] = by_id[s.folder_id]
    return innermost


async def _folder_chains(session: AsyncSession, folders: list[Folder]) -> dict[str, list[Folder]]:
    """Each folder's chain, outermost first."""
    if not folders:
        return {}
    prefixes = {p for f in folders for p in path_prefixes(f.path)}
    org_ids = {f.org_id for f in folders}
    rows = {
        (f.org_id, f.path): f
        for f in await session.scalars(
            select(Folder).where(Folder.org_id.in_(org_ids), Folder.path.in_(prefixes))
        )
    }
    return {
        f.id: [rows[(f.org_id, p)] for p in path_prefixes(f.path) if (f.org_id, p) in rows] for f in folders
    }


async def variables(session: AsyncSession, scopes: Sequence[Scope]) -> list[list[Variable]]:
    """Each scope's own variables, by name."""
    rows = await session.scalars(
        select(Variable).where(Variable.scope_id.in_({s.id for s in scopes})).order_by(Variable.name)
    )
    grouped: dict[tuple[str, str], list[Variable]] = defaultdict(list)
    for row in rows:
        grouped[(row.scope, row.scope_id)].append(row)
    return [[v for v in grouped.get(scope_key(s), []) if v.org_id == org_id_of(s)] for s in scopes]
