"""Batched reads for one GraphQL operation (or one subscription event): each DataLoader turns the
loads of one execution tick into one call of the read layer, so a page of runs costs the same few
statements whether it holds 2 runs or 100. Every batch reads through the operation's ReadScope:
one read session for a whole HTTP request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from contextlib import suppress
from typing import Any, TypeVar

from strawberry.dataloader import DataLoader

from firstlume.domain.inheritance import Resolved
from firstlume.services.context import Context
from firstlume.services.reads import Folder, ReadScope, Run, RunStep, Stack, Variable
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads import changes as change_reads
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads import settings as setting_reads
from firstlume.services.reads.changes import ChangePage, ChangePageKey
from firstlume.services.reads.runs import RunFilter, RunPageKey
from firstlume.services.reads.settings import scope_key

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Loaders:
    def __init__(self, ctx: Context, reads: ReadScope | None = None) -> None:
        self.ctx = ctx
        self.reads = reads if reads is not None else ReadScope(ctx.db, shared=False)
        self.stack = self._loader(catalog_reads.stacks_by_id)
        self.folder = self._loader(catalog_reads.folders_by_id)
        self.org_folders = self._loader(catalog_reads.folders_of_orgs)
        self.org_stacks = self._loader(catalog_reads.stacks_of_orgs)
        self.subfolders = self._loader(catalog_reads.subfolders)
        self.folder_stacks = self._loader(catalog_reads.stacks_in_folders)
        self.email = self._loader(run_reads.emails)
        self.steps = self._loader(run_reads.steps_of)
        self.queue_position = DataLoader(self._queue_positions, cache_key_fn=lambda run: run.id)
        self.lock_holder = self._loader(run_reads.lock_holders)
        self.stack_runs = self._loader(run_reads.stack_runs)
        self.stack_run_count = DataLoader(self._stack_run_counts)
        self.active_runs = self._loader(run_reads.active_runs)
        self.change_page = self._loader(change_reads.pages)
        self.change_counts = DataLoader(self._change_counts)
        self.change_facets = self._loader(change_reads.facets)
        self.effective_settings = self._loader(setting_reads.effective_settings, cache_key_fn=scope_key)
        self.variables = self._loader(setting_reads.variables, cache_key_fn=scope_key)

    def _loader(
        self, read: Callable[[Any, Sequence[K]], Awaitable[Sequence[V]]], **options: Any
    ) -> DataLoader[K, V]:
        async def batch(keys: list[K]) -> Sequence[V]:
            async with self.reads.session() as session:
                return await read(session, keys)

        return DataLoader(batch, **options)

    def seen(self, rows: Iterable[Stack | Folder]) -> None:
        """Rows read another way: a later load by id needs no query."""
        for row in rows:
            if isinstance(row, Stack):
                self.stack.prime(row.id, row)
            else:
                self.folder.prime(row.id, row)

    def forget_run(self, run_id: str) -> None:
        """Drops what is cached about one run, after an event said that it changed."""
        with suppress(KeyError):  # not loaded yet
            self.steps.clear(run_id)

    def forget_volatile(self) -> None:
        """Keeps only what does not change under a live view (stacks, folders, users' emails)."""
        for loader in (
            self.org_folders, self.org_stacks, self.subfolders, self.folder_stacks, self.queue_position,
            self.lock_holder, self.stack_runs, self.stack_run_count, self.active_runs, self.change_page,
            self.change_counts, self.change_facets, self.effective_settings, self.variables,
        ):  # fmt: skip
            loader.clear_all()

    async def _queue_positions(self, rows: list[Run]) -> list[int | None]:
        if not any(r.status == run_reads.QUEUED for r in rows):
            return [None] * len(rows)
        async with self.reads.session() as session:
            positions = await run_reads.queue_positions(session, rows)
        return [positions.get(r.id) for r in rows]

    async def _stack_run_counts(self, keys: list[tuple[str, RunFilter]]) -> list[int]:
        by_filter: dict[RunFilter, list[str]] = {}
        for stack_id, run_filter in keys:
            by_filter.setdefault(run_filter, []).append(stack_id)
        found: dict[tuple[str, RunFilter], int] = {}
        async with self.reads.session() as session:
            for run_filter, stack_ids in by_filter.items():
                counts = await run_reads.stack_run_counts(session, stack_ids, run_filter)
                found.update({(i, run_filter): n for i, n in zip(stack_ids, counts, strict=True)})
        return [found[key] for key in keys]

    async def _change_counts(self, keys: list[tuple[str, change_reads.ChangeFilter]]) -> list[dict[str, int]]:
        by_filter: dict[change_reads.ChangeFilter, list[str]] = {}
        for run_id, change_filter in keys:
            by_filter.setdefault(change_filter, []).append(run_id)
        found: dict[tuple[str, change_reads.ChangeFilter], dict[str, int]] = {}
        async with self.reads.session() as session:
            for change_filter, run_ids in by_filter.items():
                counts = await change_reads.counts(session, run_ids, change_filter)
                found.update({(i, change_filter): c for i, c in zip(run_ids, counts, strict=True)})
        return [found[key] for key in keys]


__all__ = ["ChangePage", "ChangePageKey", "Loaders", "Resolved", "RunPageKey", "RunStep", "Variable"]
