"""Batched reads for one GraphQL operation (or one subscription event): each DataLoader turns the
loads of one execution tick into one query, so a page of runs costs the same few statements
whether it holds 2 runs or 100.

Each batch reads in its own short transaction: resolvers run concurrently, and an AsyncSession
must not be shared by concurrent tasks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from contextlib import suppress
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from strawberry.dataloader import DataLoader

from firstlume.db.models import Folder, Organization, ResourceChange, Run, RunStep, Stack, User, Variable
from firstlume.domain.inheritance import Resolved, levels_outermost_first, resolve_settings
from firstlume.domain.runs import ACTIVE, RunStatus
from firstlume.services.context import Context
from firstlume.services.inherited import Scope, explicit_settings, scope_name
from firstlume.services.runs import queue_positions

K = TypeVar("K", bound=Hashable)
ACTIVE_VALUES = [s.value for s in ACTIVE]


class RunPageKey(NamedTuple):
    stack_id: str
    limit: int
    before: int | None


def scope_key(scope: Scope) -> tuple[str, str]:
    return scope_name(scope), scope.id


def folder_prefixes(path: str) -> list[str]:
    segments = path.split("/")
    return ["/".join(segments[: i + 1]) for i in range(len(segments))]


def _grouped(rows: Iterable[Any], key: str, wanted: Sequence[K]) -> list[list[Any]]:
    groups: dict[Any, list[Any]] = defaultdict(list)
    for row in rows:
        groups[getattr(row, key)].append(row)
    return [groups.get(k, []) for k in wanted]


class Loaders:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.stack = DataLoader(self._stacks)
        self.folder = DataLoader(self._folders)
        self.org_folders = DataLoader(self._org_folders)
        self.org_stacks = DataLoader(self._org_stacks)
        self.subfolders = DataLoader(self._subfolders)
        self.folder_stacks = DataLoader(self._folder_stacks)
        self.email = DataLoader(self._emails)
        self.steps = DataLoader(self._steps)
        self.changes = DataLoader(self._changes)
        self.queue_position = DataLoader(self._queue_positions, cache_key_fn=lambda run: run.id)
        self.stack_runs = DataLoader(self._stack_runs)
        self.stack_run_count = DataLoader(self._stack_run_counts)
        self.active_runs = DataLoader(self._active_runs)
        self.effective_settings = DataLoader(self._effective_settings, cache_key_fn=scope_key)
        self.variables = DataLoader(self._variables, cache_key_fn=scope_key)

    def forget_run(self, run_id: str) -> None:
        """Drops what is cached about one run, after an event said that it changed."""
        for loader in (self.steps, self.changes):
            with suppress(KeyError):  # not loaded yet
                loader.clear(run_id)

    def forget_volatile(self) -> None:
        """Keeps only what does not change under a live view (stacks, folders, users' emails)."""
        for loader in (
            self.org_folders, self.org_stacks, self.subfolders, self.folder_stacks, self.queue_position,
            self.stack_runs, self.stack_run_count, self.active_runs, self.effective_settings, self.variables,
        ):  # fmt: skip
            loader.clear_all()

    def _session(self) -> Any:
        return self.ctx.db.transaction()

    async def _by_id(self, model: Any, ids: list[str]) -> list[Any]:
        async with self._session() as session:
            rows = {row.id: row for row in await session.scalars(select(model).where(model.id.in_(ids)))}
        return [rows.get(i) for i in ids]

    async def _children(self, model: Any, column: str, keys: list[str], *order_by: Any) -> list[list[Any]]:
        async with self._session() as session:
            rows = await session.scalars(
                select(model).where(getattr(model, column).in_(keys)).order_by(*order_by)
            )
            return _grouped(rows, column, keys)

    async def _stacks(self, ids: list[str]) -> list[Stack | None]:
        return await self._by_id(Stack, ids)

    async def _folders(self, ids: list[str]) -> list[Folder | None]:
        return await self._by_id(Folder, ids)

    def seen(self, rows: Iterable[Stack | Folder]) -> None:
        """Rows read another way: a later load by id needs no query."""
        for row in rows:
            (self.stack if isinstance(row, Stack) else self.folder).prime(row.id, row)  # type: ignore[arg-type]

    async def _seen_groups(self, groups: list[list[Any]]) -> list[list[Any]]:
        for group in groups:
            self.seen(group)
        return groups

    async def _org_folders(self, org_ids: list[str]) -> list[list[Folder]]:
        return await self._seen_groups(await self._children(Folder, "org_id", org_ids, Folder.path))

    async def _org_stacks(self, org_ids: list[str]) -> list[list[Stack]]:
        return await self._seen_groups(await self._children(Stack, "org_id", org_ids, Stack.slug))

    async def _subfolders(self, parent_ids: list[str]) -> list[list[Folder]]:
        return await self._seen_groups(await self._children(Folder, "parent_id", parent_ids, Folder.path))

    async def _folder_stacks(self, folder_ids: list[str]) -> list[list[Stack]]:
        return await self._seen_groups(await self._children(Stack, "folder_id", folder_ids, Stack.slug))

    async def _steps(self, run_ids: list[str]) -> list[list[RunStep]]:
        return await self._children(RunStep, "run_id", run_ids, RunStep.run_id, RunStep.position)

    async def _changes(self, run_ids: list[str]) -> list[list[ResourceChange]]:
        return await self._children(
            ResourceChange, "run_id", run_ids, ResourceChange.run_id, ResourceChange.position
        )

    async def _emails(self, user_ids: list[str]) -> list[str | None]:
        async with self._session() as session:
            emails = dict(
                (await session.execute(select(User.id, User.email).where(User.id.in_(user_ids)))).all()
            )
        return [emails.get(i) for i in user_ids]

    async def _queue_positions(self, rows: list[Run]) -> list[int | None]:
        if not any(r.status == RunStatus.QUEUED for r in rows):
            return [None] * len(rows)
        async with self._session() as session:
            positions = await queue_positions(session, rows)
        return [positions.get(r.id) for r in rows]

    async def _stack_runs(self, keys: list[RunPageKey]) -> list[list[Run]]:
        """Newest first, `limit` per stack, in one query per distinct page shape."""
        found: dict[RunPageKey, list[Run]] = {}
        shapes: dict[tuple[int, int | None], list[str]] = defaultdict(list)
        for key in keys:
            shapes[(key.limit, key.before)].append(key.stack_id)
        async with self._session() as session:
            for (limit, before), stack_ids in shapes.items():
                rank = (
                    func.row_number()
                    .over(partition_by=Run.stack_id, order_by=Run.number.desc())
                    .label("rank")
                )
                ranked = select(Run.id, rank).where(Run.stack_id.in_(stack_ids))
                if before is not None:
                    ranked = ranked.where(Run.number < before)
                page = ranked.subquery()
                rows = await session.scalars(
                    select(Run)
                    .join(page, page.c.id == Run.id)
                    .where(page.c.rank <= limit)
                    .order_by(Run.stack_id, Run.number.desc())
                )
                for stack_id, group in zip(stack_ids, _grouped(rows, "stack_id", stack_ids), strict=True):
                    found[RunPageKey(stack_id, limit, before)] = group
        return [found[key] for key in keys]

    async def _stack_run_counts(self, stack_ids: list[str]) -> list[int]:
        async with self._session() as session:
            counts = dict(
                (
                    await session.execute(
                        select(Run.stack_id, func.count())
                        .where(Run.stack_id.in_(stack_ids))
                        .group_by(Run.stack_id)
                    )
                ).all()
            )
        return [int(counts.get(i, 0)) for i in stack_ids]

    async def _active_runs(self, org_ids: list[str]) -> list[list[Run]]:
        # The same list as runs.list_active_runs, for several organizations at once.
        async with self._session() as session:
            rows = await session.scalars(
                select(Run)
                .where(Run.org_id.in_(org_ids), Run.status.in_(ACTIVE_VALUES))
                .order_by(Run.created_at, Run.number)
            )
            return _grouped(rows, "org_id", org_ids)

    async def _effective_settings(self, scopes: list[Scope]) -> list[dict[str, Resolved]]:
        """inherited.effective_settings for many scopes: the organizations and every folder on
        the scopes' paths are read in three queries at most."""
        async with self._session() as session:
            orgs = {s.id: s for s in scopes if isinstance(s, Organization)}
            wanted_orgs = {s.org_id for s in scopes if not isinstance(s, Organization)} - orgs.keys()
            if wanted_orgs:
                orgs.update(
                    {
                        o.id: o
                        for o in await session.scalars(
                            select(Organization).where(Organization.id.in_(wanted_orgs))
                        )
                    }
                )
            innermost = await self._innermost_folders(session, scopes)
            chains = await self._folder_chains(session, list(innermost.values()))
        results = []
        for scope in scopes:
            org = orgs[scope.id if isinstance(scope, Organization) else scope.org_id]
            folder = innermost.get(scope_key(scope))
            chain = chains.get(folder.id, []) if folder else []
            levels = levels_outermost_first(
                explicit_settings(org),
                [(f.path, explicit_settings(f)) for f in chain],
                explicit_settings(scope) if isinstance(scope, Stack) else None,
            )
            results.append(resolve_settings(levels))
        return results

    @staticmethod
    async def _innermost_folders(session: AsyncSession, scopes: list[Scope]) -> dict[tuple[str, str], Folder]:
        innermost: dict[tuple[str, str], Folder] = {scope_key(s): s for s in scopes if isinstance(s, Folder)}
        stack_folders = {s.folder_id for s in scopes if isinstance(s, Stack) and s.folder_id}
        if stack_folders:
            by_id = {
                f.id: f for f in await session.scalars(select(Folder).where(Folder.id.in_(stack_folders)))
            }
            for s in scopes:
                if isinstance(s, Stack) and s.folder_id in by_id:
                    innermost[scope_key(s)] = by_id[s.folder_id]
        return innermost

    @staticmethod
    async def _folder_chains(session: AsyncSession, folders: list[Folder]) -> dict[str, list[Folder]]:
        """Each folder's chain, outermost first (catalog.folder_chain for many folders)."""
        if not folders:
            return {}
        prefixes = {p for f in folders for p in folder_prefixes(f.path)}
        org_ids = {f.org_id for f in folders}
        rows = {
            (f.org_id, f.path): f
            for f in await session.scalars(
                select(Folder).where(Folder.org_id.in_(org_ids), Folder.path.in_(prefixes))
            )
        }
        return {
            f.id: [rows[(f.org_id, p)] for p in folder_prefixes(f.path) if (f.org_id, p) in rows]
            for f in folders
        }

    async def _variables(self, scopes: list[Scope]) -> list[list[Variable]]:
        """inherited.list_variables for many scopes in one query."""
        async with self._session() as session:
            rows = list(
                await session.scalars(
                    select(Variable)
                    .where(Variable.scope_id.in_([s.id for s in scopes]))
                    .order_by(Variable.name)
                )
            )
        grouped: dict[tuple[str, str], list[Variable]] = defaultdict(list)
        for row in rows:
            grouped[(row.scope, row.scope_id)].append(row)
        result = []
        for scope in scopes:
            org_id = scope.id if isinstance(scope, Organization) else scope.org_id
            result.append([v for v in grouped.get(scope_key(scope), []) if v.org_id == org_id])
        return result
