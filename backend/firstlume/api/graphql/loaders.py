"""Batched reads for one GraphQL operation (or one subscription event): each DataLoader turns the
loads of one execution tick into one call of the read layer, so a page of runs costs the same few
statements whether it holds 2 runs or 100. Every batch reads through the operation's ReadScope:
one read session for a whole HTTP request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from contextlib import suppress
from functools import cached_property
from typing import Any, TypeVar

from strawberry.dataloader import DataLoader

from firstlume.domain.inheritance import Resolved
from firstlume.services.access.folder_grants import Caller
from firstlume.services.context import Context
from firstlume.services.reads import ReadScope
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads import changes as change_reads
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads import settings as setting_reads
from firstlume.services.reads import state as state_reads
from firstlume.services.reads import summaries as summary_reads
from firstlume.services.reads.catalog import FolderRecord, StackRecord
from firstlume.services.reads.changes import ChangeFilter, ChangePage, ChangePageKey, Facets
from firstlume.services.reads.runs import RunFilter, RunPageKey, RunRecord, StepRecord
from firstlume.services.reads.settings import Scope, VariableRecord, scope_key
from firstlume.services.reads.state import StateHeadRecord

K = TypeVar("K", bound=Hashable)
VOLATILE = (
    "org_folders", "org_stacks", "subfolders", "folder_stacks", "queue_position", "lock_holder", "stack_runs",
    "stack_run_count", "active_runs", "change_page", "change_counts", "change_facets", "change_states",
    "effective_settings",
    "variables", "state_heads", "stack_summary",
)  # fmt: skip
V = TypeVar("V")


class Loaders:
    def __init__(self, ctx: Context, reads: ReadScope | None = None) -> None:
        self.ctx = ctx
        self.reads = reads if reads is not None else ReadScope(ctx.db, shared=False)
        # The caller's organization role and folder grants, per organization (Stack.viewerRole):
        # read once per operation, however many stacks ask.
        self.viewer_grants: dict[str, Awaitable[Caller | None]] = {}
        # Stacks read with their organization, by (organization id, slug), None when there is no
        # such stack (Query.organization, for Organization.stack).
        self.stacks_by_slug: dict[tuple[str, str], StackRecord | None] = {}
        # The GraphQL Stack object of each stack row, by id: the runs of a page share their
        # stack's (types/runs.Run.stack).
        self.stack_objects: dict[str, Any] = {}
        # The read of a page's steps, by page: a query may ask for one page many times.
        self._page_steps: dict[RunPageKey, asyncio.Future[object]] = {}

    # Each loader is made when first used: an operation uses a few of them.

    @cached_property
    def stack(self) -> DataLoader[str, StackRecord | None]:
        return self._loader(catalog_reads.stacks_by_id)

    @cached_property
    def folder(self) -> DataLoader[str, FolderRecord | None]:
        return self._loader(catalog_reads.folders_by_id)

    @cached_property
    def org_folders(self) -> DataLoader[str, list[FolderRecord]]:
        return self._loader(catalog_reads.folders_of_orgs)

    @cached_property
    def org_stacks(self) -> DataLoader[str, list[StackRecord]]:
        return self._loader(catalog_reads.stacks_of_orgs)

    @cached_property
    def subfolders(self) -> DataLoader[str, list[FolderRecord]]:
        return self._loader(catalog_reads.subfolders)

    @cached_property
    def folder_stacks(self) -> DataLoader[str, list[StackRecord]]:
        return self._loader(catalog_reads.stacks_in_folders)

    @cached_property
    def email(self) -> DataLoader[str, str | None]:
        return self._loader(run_reads.emails)

    @cached_property
    def steps(self) -> DataLoader[str, list[StepRecord]]:
        return self._loader(run_reads.steps_of)

    @cached_property
    def queue_position(self) -> DataLoader[str, int | None]:
        """By run id; asked only of queued runs."""
        return self._loader(run_reads.queue_positions)

    @cached_property
    def output_changes(self) -> DataLoader[str, list[change_reads.OutputChangeRecord]]:
        return self._loader(change_reads.output_changes)

    @cached_property
    def person_lock(self) -> DataLoader[str, state_reads.PersonLock | None]:
        """By stack id: a state lock a person holds, which its waiting runs wait for."""
        return self._loader(state_reads.person_locks)

    @cached_property
    def lock_holder(self) -> DataLoader[str, RunRecord | None]:
        return self._loader(run_reads.lock_holders)

    @cached_property
    def stack_runs(self) -> DataLoader[RunPageKey, list[RunRecord]]:
        async def batch(keys: list[RunPageKey]) -> list[list[RunRecord]]:
            extras = run_reads.PageExtras()
            async with self.reads.session() as session:
                pages = await run_reads.stack_runs(session, keys, extras)
            # What a page of one stack read beside its runs: its runs' `createdBy` and
            # `queuePosition` then answer without a statement of their own.
            for user_id, email in extras.emails.items():
                self.email.prime(user_id, email)
            for count_key, total in extras.totals.items():
                self.stack_run_count.prime(count_key, total)
            for page in pages:
                for run in page:
                    if run.id in extras.positions:
                        self.queue_position.prime(run.id, extras.positions[run.id])
            return pages

        return DataLoader(batch)

    @cached_property
    def stack_run_count(self) -> DataLoader[tuple[str, RunFilter], int]:
        return DataLoader(self._stack_run_counts)

    @cached_property
    def active_runs(self) -> DataLoader[str, list[RunRecord]]:
        return self._loader(run_reads.active_runs)

    @cached_property
    def change_page(self) -> DataLoader[ChangePageKey, ChangePage]:
        return self._loader(change_reads.pages)

    @cached_property
    def change_counts(self) -> DataLoader[tuple[str, ChangeFilter], dict[str, int]]:
        return DataLoader(self._change_counts)

    @cached_property
    def change_facets(self) -> DataLoader[str, Facets]:
        return self._loader(change_reads.facets)

    @cached_property
    def change_states(self) -> DataLoader[str, dict[str, int]]:
        return self._loader(change_reads.state_counts)

    @cached_property
    def effective_settings(self) -> DataLoader[Scope, dict[str, Resolved]]:
        return self._loader(setting_reads.effective_settings, cache_key_fn=scope_key)

    @cached_property
    def variables(self) -> DataLoader[Scope, list[VariableRecord]]:
        return self._loader(setting_reads.variables, cache_key_fn=scope_key)

    @cached_property
    def state_heads(self) -> DataLoader[str, list[StateHeadRecord]]:
        return self._loader(state_reads.heads_of_stacks)

    @cached_property
    def stack_summary(self) -> DataLoader[str, summary_reads.StackSummary]:
        return self._loader(summary_reads.stack_summaries)

    async def steps_of_page(self, key: RunPageKey, runs: Sequence[RunRecord]) -> None:
        """Loads the steps of a page's runs; asked again for the same page (the 100 copies of one
        stack's page in `runs { nodes { stack { runs … } } }`), waits for the same read instead
        of asking the loader for each run again (10,000 waiters woken in one turn of the loop)."""
        pending = self._page_steps.get(key)
        if pending is None:
            pending = self._page_steps[key] = asyncio.ensure_future(
                self.steps.load_many([r.id for r in runs])
            )
        await pending

    def _loader(
        self, read: Callable[[Any, Sequence[K]], Awaitable[Sequence[V]]], **options: Any
    ) -> DataLoader[K, V]:
        async def batch(keys: list[K]) -> Sequence[V]:
            async with self.reads.session() as session:
                return await read(session, keys)

        return DataLoader(batch, **options)

    def seen(self, rows: Iterable[StackRecord | FolderRecord]) -> None:
        """Rows read another way: a later load by id needs no query."""
        for row in rows:
            if isinstance(row, StackRecord):
                self.stack.prime(row.id, row)
            else:
                self.folder.prime(row.id, row)

    def forget_run(self, run_id: str) -> None:
        """Drops what is cached about one run, after an event said that it changed."""
        with suppress(KeyError):  # not loaded yet
            self.steps.clear(run_id)
        self._page_steps.clear()

    def forget_volatile(self) -> None:
        """Keeps only what does not change under a live view (stacks, folders, users' emails)."""
        for name in VOLATILE:
            self.__dict__.pop(name, None)
        self._page_steps.clear()

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

    async def _change_counts(self, keys: list[tuple[str, ChangeFilter]]) -> list[dict[str, int]]:
        by_filter: dict[ChangeFilter, list[str]] = {}
        for run_id, change_filter in keys:
            by_filter.setdefault(change_filter, []).append(run_id)
        found: dict[tuple[str, ChangeFilter], dict[str, int]] = {}
        async with self.reads.session() as session:
            for change_filter, run_ids in by_filter.items():
                counts = await change_reads.counts(session, run_ids, change_filter)
                found.update({(i, change_filter): c for i, c in zip(run_ids, counts, strict=True)})
        return [found[key] for key in keys]


def known_or_awaited(loader: DataLoader[K, V], key: K) -> V | Awaitable[V]:
    """The loader's value for `key` when it is already loaded, else the awaitable of it. A
    resolver returning this is synchronous whenever it can be: graphql-core awaits only what is
    awaitable, and an awaitable field costs a task and a gather per object (a page of 20 runs
    with three such fields spent a third of its time creating tasks)."""
    pending = loader.load(key)
    if isinstance(pending, asyncio.Future) and pending.done() and not pending.cancelled():
        if pending.exception() is None:
            return pending.result()  # type: ignore[no-any-return]
    return pending
