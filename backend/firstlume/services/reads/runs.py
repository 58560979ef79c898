"""Reads of runs: one run, a stack's history (filtered, paged), an organization's active runs, and
what a run page shows beside the row (its stack's slug, people's emails, steps, queue position,
the run holding its stack's lock). Every function takes many keys and answers in a fixed number
of statements, so REST lists and GraphQL DataLoaders cost the same for 1 run as for 100.

Runs and steps come back as read models (RunRecord, StepRecord) filled from plain column rows:
a page of runs read as ORM objects (an identity map entry, an instance state and instrumented
attributes for each) cost about a tenth of a stack page's time (py-spy of the served control
plane under wrk, P5)."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, cast

from sqlalchemy import Select, Table, and_, bindparam, case, exists, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from firstlume.db.models import Run, RunStep, Stack, StateHead, User
from firstlume.db.types import utcnow
from firstlume.domain.changes import Summary
from firstlume.domain.runs import (
    ACTIVE,
    HOLDS_LOCK,
    WAITS_FOR_STATE_LOCK,
    RunStatus,
    RunType,
    StepStatus,
    TriggerKind,
)
from firstlume.domain.state import lock_wait_reason
from firstlume.services.reads.rows import column_rows, columns_of, record_of
from firstlume.services.reads.state import held_by_person, person_locks

Q = TypeVar("Q", bound=Select[*tuple[Any, ...]])

ACTIVE_VALUES = sorted(s.value for s in ACTIVE)
LOCK_VALUES = sorted(s.value for s in HOLDS_LOCK)
QUEUED = RunStatus.QUEUED.value


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run as the APIs show it: every column but the execution's bookkeeping (heartbeat,
    attempt, planned serials)."""

    id: str
    org_id: str
    stack_id: str
    number: int
    type: RunType
    status: RunStatus
    trigger_kind: TriggerKind
    trigger_commit: str | None
    trigger_delivery: str | None
    # Who started it when no user did: "git:<author email>" for a push, "schedule" for drift.
    trigger_actor: str | None
    trigger_upstream_run_id: str | None
    proposed: bool
    trigger_pull_request: dict[str, Any] | None
    pull_request_id: str | None
    created_at: datetime
    created_by_id: str | None
    updated_at: datetime
    finished_at: datetime | None
    error: str | None
    commit_sha: str | None
    commit_author: str | None
    commit_message: str | None
    commit_url: str | None
    approval_required: bool | None
    approval_required_origin: str | None
    confirm_destructive: bool | None
    confirm_destructive_origin: str | None
    approvers: list[str] | None
    approvers_origin: str | None
    forbid_self_approval: bool | None
    forbid_self_approval_origin: str | None
    policies: list[str] | None
    policies_origin: str | None
    policy_checks: list[dict[str, Any]] | None
    approvals_required: int | None
    policy_approvers: list[str] | None
    approvals: list[dict[str, Any]] | None
    approved_by_id: str | None
    approved_at: datetime | None
    ended_by: str | None
    comment: str | None
    acknowledged: list[str]
    config_yaml: str | None
    engine: str | None
    variables_used: list[dict[str, Any]]
    state_backends: list[dict[str, Any]]
    summary_delete: int
    summary_replace: int
    summary_update: int
    summary_create: int
    summary_outputs: int
    drift_base_run_id: str | None
    has_plan: bool
    failed_resource_count: int
    failed_resource_addresses: list[str]
    log_length: int


@dataclass(frozen=True, slots=True)
class StepRecord:
    run_id: str
    name: str
    status: StepStatus
    started_at: datetime | None
    finished_at: datetime | None


_RUNS = cast(Table, Run.__table__)
RUN_COLUMNS = columns_of(RunRecord, _RUNS)
_COLUMNS = len(RUN_COLUMNS)
STEP_COLUMNS = columns_of(StepRecord, cast(Table, RunStep.__table__))


def run_record(run: Run) -> RunRecord:
    """The read model of a run a change has in hand."""
    return record_of(RunRecord, run)


@dataclass(frozen=True)
class RunFilter:
    """Which runs of a history to list; empty tuples mean any."""

    statuses: tuple[RunStatus, ...] = ()
    types: tuple[RunType, ...] = ()
    triggers: tuple[TriggerKind, ...] = ()

    def apply(self, query: Q, runs: Any = Run) -> Q:
        """`query` narrowed to the runs that pass; `runs` is the runs table or an alias of it."""
        if self.triggers:
            query = query.where(runs.trigger_kind.in_(sorted(t.value for t in self.triggers)))
        if self.statuses:
            query = query.where(runs.status.in_(sorted(s.value for s in self.statuses)))
        if self.types:
            query = query.where(runs.type.in_(sorted(t.value for t in self.types)))
        return query


@dataclass(frozen=True)
class RunPageKey:
    """A page of one stack's runs, newest first: `limit` runs numbered below `before`.
    `counted`: the page's statement also counts the stack's runs that pass the filter (on any
    page), for a view that shows the total beside the page (PageExtras.totals)."""

    stack_id: str
    limit: int
    before: int | None = None
    filter: RunFilter = field(default_factory=RunFilter)
    counted: bool = False


@dataclass(frozen=True, slots=True)
class RunDetails:
    """A run and what its page shows beside the row: the read model of the REST Run."""

    run: RunRecord
    stack_slug: str
    created_by: str | None
    approved_by: str | None
    steps: list[StepRecord]
    queue_position: int | None
    # Why a run that waits for a person's state lock waits (domain/state.py lock_wait_reason).
    waiting_for: str | None = None

    @property
    def started_at(self) -> datetime | None:
        return started_at(self.steps)


def summary_of(run: RunRecord) -> Summary:
    return Summary(
        delete=run.summary_delete,
        replace=run.summary_replace,
        update=run.summary_update,
        create=run.summary_create,
        outputs=run.summary_outputs,
    )


async def _waiting_reasons(session: AsyncSession, runs: Sequence[RunRecord]) -> dict[str, str]:
    """For each run that waits for a person's state lock (runs.WAITS_FOR_STATE_LOCK), why."""
    # A proposed run takes no state lock: it never waits for one.
    waiting = [r for r in runs if r.status in WAITS_FOR_STATE_LOCK and not r.proposed]
    if not waiting:
        return {}
    stack_ids = sorted({r.stack_id for r in waiting})
    locks = dict(zip(stack_ids, await person_locks(session, stack_ids), strict=True))
    now = utcnow()
    reasons = {}
    for run in waiting:
        lock = locks[run.stack_id]
        if lock is not None:
            reasons[run.id] = lock_wait_reason(lock.holder, lock.locked_at, lock.unit, now)
    return reasons


def started_at(steps: Iterable[StepRecord]) -> datetime | None:
    """When the run's first phase started: queue time is not part of a run's duration."""
    return min((s.started_at for s in steps if s.started_at is not None), default=None)


def duration_ms(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None:
        return None
    return int((end - start).total_seconds() * 1000)


def _grouped(rows: Iterable[Any], key: str, wanted: Sequence[Any]) -> list[list[Any]]:
    groups: dict[Any, list[Any]] = defaultdict(list)
    for row in rows:
        groups[getattr(row, key)].append(row)
    return [groups.get(k, []) for k in wanted]


# Single runs and lists ------------------------------------------------------------------------


def _runs(rows: Iterable[Any]) -> list[RunRecord]:
    return [RunRecord(*row[:_COLUMNS]) for row in rows]


_RUN_IN_ORG = select(*RUN_COLUMNS).where(Run.id == bindparam("run_id"), Run.org_id == bindparam("org_id"))
_RUN = select(*RUN_COLUMNS).where(Run.id == bindparam("run_id"))


async def run_in_org(session: AsyncSession, org_id: str, run_id: str) -> RunRecord | None:
    if not isinstance(run_id, str) or len(run_id) > 64:
        return None
    rows = await column_rows(session, _RUN_IN_ORG, {"run_id": run_id, "org_id": org_id})
    return RunRecord(*rows[0]) if rows else None


async def run_with_steps(session: AsyncSession, run_id: str) -> tuple[RunRecord, list[StepRecord]] | None:
    rows = await column_rows(session, _RUN, {"run_id": run_id})
    if not rows:
        return None
    [steps] = await steps_of(session, [run_id])
    return RunRecord(*rows[0]), steps


async def run_status(session: AsyncSession, run_id: str) -> str | None:
    return await session.scalar(select(Run.status).where(Run.id == run_id))


async def runs_by_id(session: AsyncSession, run_ids: Sequence[str]) -> list[RunRecord | None]:
    rows = await column_rows(session, select(*RUN_COLUMNS).where(Run.id.in_(set(run_ids))))
    found = {r.id: r for r in _runs(rows)}
    return [found.get(i) for i in run_ids]


@dataclass
class PageExtras:
    """What the statement of one stack's page reads beside its runs, for the page to show without
    a statement each: the starters' emails and the queued runs' positions."""

    emails: dict[str, str] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)
    # (stack id, filter) → how many of the stack's runs pass it: for the pages asked `counted`.
    totals: dict[tuple[str, RunFilter], int] = field(default_factory=dict)


async def stack_runs(
    session: AsyncSession, keys: Sequence[RunPageKey], extras: PageExtras | None = None
) -> list[list[RunRecord]]:
    """Pages of several stacks' histories, one statement per distinct page shape. With `extras`,
    a page of one stack also brings its starters' emails and queue positions into it."""
    found: dict[tuple[str, int, int | None, RunFilter], list[RunRecord]] = {}
    shapes: dict[tuple[int, int | None, RunFilter], list[str]] = defaultdict(list)
    counted = {(key.stack_id, key.filter) for key in keys if key.counted}
    for key in keys:
        shapes[(key.limit, key.before, key.filter)].append(key.stack_id)
    for (limit, before, run_filter), stack_ids in shapes.items():
        if len(stack_ids) == 1:
            # One stack's page (a stack's page, most often): its newest runs by the (stack,
            # number) index, with no ranking of the stack's whole history.
            [stack_id] = stack_ids
            counting = (stack_id, run_filter) in counted
            rows = await column_rows(
                session,
                _one_stack_page(run_filter, before is not None, counting),
                {"stack_id": stack_id, "before": before, "limit": limit},
            )
            runs = _runs(rows)
            if extras is not None:
                for run, (email, position, *_) in zip(runs, (row[_COLUMNS:] for row in rows), strict=True):
                    if email is not None and run.created_by_id:
                        extras.emails[run.created_by_id] = email
                    if position is not None:
                        extras.positions[run.id] = int(position)
                if counting and (rows or before is None):
                    # The count is the same on every row (uncorrelated). An empty page past the
                    # cursor does not say how many came before it.
                    extras.totals[(stack_id, run_filter)] = int(rows[0][_COLUMNS + 2]) if rows else 0
            found[(stack_id, limit, before, run_filter)] = runs
            continue
        rank = func.row_number().over(partition_by=Run.stack_id, order_by=Run.number.desc()).label("rank")
        ranked = run_filter.apply(select(Run.id, rank).where(Run.stack_id.in_(stack_ids)))
        if before is not None:
            ranked = ranked.where(Run.number < before)
        page = ranked.subquery()
        ranked_rows = await column_rows(
            session,
            select(*RUN_COLUMNS)
            .join(page, page.c.id == _RUNS.c.id)
            .where(page.c.rank <= limit)
            .order_by(_RUNS.c.stack_id, _RUNS.c.number.desc()),
        )
        records = _runs(ranked_rows)
        for stack_id, group in zip(stack_ids, _grouped(records, "stack_id", stack_ids), strict=True):
            found[(stack_id, limit, before, run_filter)] = group
    return [found[(key.stack_id, key.limit, key.before, key.filter)] for key in keys]


# Built once per shape of filter (a handful: the UI's tabs), like the other statements that
# every page of runs reads: building one costs about as much as running it.
@functools.lru_cache(maxsize=64)
def _one_stack_page(run_filter: RunFilter, paged: bool, counted: bool) -> Select[*tuple[Any, ...]]:
    # The starter's email and a queued run's position ride along: two statements fewer a page.
    columns: list[Any] = [*RUN_COLUMNS, _creator.email, case((Run.status == QUEUED, _AHEAD))]
    if counted:
        # Uncorrelated, so the database counts once for the page, and the page itself still
        # stops at its limit in the (stack, number) index.
        every = aliased(Run, name="every")
        columns.append(
            run_filter.apply(
                select(func.count()).select_from(every).where(every.stack_id == bindparam("stack_id")), every
            ).scalar_subquery()
        )
    query = run_filter.apply(
        select(*columns)
        .outerjoin(_creator, _creator.id == Run.created_by_id)
        .where(Run.stack_id == bindparam("stack_id"))
    )
    if paged:
        query = query.where(Run.number < bindparam("before"))
    return query.order_by(Run.number.desc()).limit(bindparam("limit"))


@functools.lru_cache(maxsize=64)
def _run_counts(run_filter: RunFilter) -> Select[str, int]:
    return run_filter.apply(
        select(Run.stack_id, func.count())
        .where(Run.stack_id.in_(bindparam("ids", expanding=True)))
        .group_by(Run.stack_id)
    )


async def stack_run_counts(
    session: AsyncSession, stack_ids: Sequence[str], run_filter: RunFilter | None = None
) -> list[int]:
    query = _run_counts(run_filter or RunFilter())
    counts = dict(await column_rows(session, query, {"ids": sorted(set(stack_ids))}))
    return [int(counts.get(i, 0)) for i in stack_ids]


async def active_runs(
    session: AsyncSession, org_ids: Sequence[str], run_filter: RunFilter | None = None
) -> list[list[RunRecord]]:
    """Every run of each organization that has not finished, oldest first."""
    query = (
        (run_filter or RunFilter())
        .apply(select(*RUN_COLUMNS).where(Run.org_id.in_(set(org_ids)), Run.status.in_(ACTIVE_VALUES)))
        .order_by(Run.created_at, Run.number)
    )
    return _grouped(_runs(await column_rows(session, query)), "org_id", org_ids)


# What a run shows beside its row ----------------------------------------------------------------


async def steps_of(session: AsyncSession, run_ids: Sequence[str]) -> list[list[StepRecord]]:
    rows = await column_rows(
        session,
        select(*STEP_COLUMNS)
        .where(RunStep.run_id.in_(set(run_ids)))
        .order_by(RunStep.run_id, RunStep.position),
    )
    return _grouped((StepRecord(*row) for row in rows), "run_id", run_ids)


_EMAILS = select(User.id, User.email).where(User.id.in_(bindparam("ids", expanding=True)))


async def emails(session: AsyncSession, user_ids: Sequence[str]) -> list[str | None]:
    found = dict(await column_rows(session, _EMAILS, {"ids": sorted(set(user_ids))}))
    return [found.get(i) for i in user_ids]


_earlier = aliased(Run, name="earlier")
# How many queued runs of the run's stack arrived no later than it.
_AHEAD = (
    select(func.count())
    .where(
        _earlier.stack_id == Run.stack_id,
        _earlier.status == QUEUED,
        _earlier.number <= Run.number,
        _earlier.proposed == Run.proposed,
    )
    .correlate(Run)
    .scalar_subquery()
)

_QUEUE_POSITIONS = select(Run.id, _AHEAD).where(
    Run.id.in_(bindparam("ids", expanding=True)), Run.status == QUEUED
)


async def queue_positions(session: AsyncSession, run_ids: Sequence[str]) -> list[int | None]:
    """Position in its stack's queue (1 = starts next) of each run, None for a run not queued: a
    count of the queued runs of the same stack that arrived no later, answered by the
    (stack_id, status, number) index without reading the queue itself."""
    rows = await column_rows(session, _QUEUE_POSITIONS, {"ids": sorted(set(run_ids))})
    found = {run_id: int(position) for run_id, position in rows}
    return [found.get(i) for i in run_ids]


async def lock_holders(session: AsyncSession, stack_ids: Sequence[str]) -> list[RunRecord | None]:
    """The run holding each stack's lock, if any (the database allows one per stack)."""
    rows = await column_rows(
        session,
        select(*RUN_COLUMNS).where(
            Run.stack_id.in_(set(stack_ids)), Run.status.in_(LOCK_VALUES), ~Run.proposed
        ),
    )
    found = {r.stack_id: r for r in _runs(rows)}
    return [found.get(i) for i in stack_ids]


async def details(
    session: AsyncSession,
    runs: Sequence[RunRecord],
    *,
    slugs: dict[str, str] | None = None,
    known_emails: dict[str, str] | None = None,
    known_positions: dict[str, int] | None = None,
    just_queued: bool = False,
) -> list[RunDetails]:
    """RunDetails of runs already read, in their order: what is not known already is read in one
    statement per kind (stack slugs, emails, steps, queue positions). Runs `just_queued` have no
    steps yet: none are read."""
    if not runs:
        return []
    slugs = dict(slugs or {})
    missing_stacks = {r.stack_id for r in runs} - slugs.keys()
    if missing_stacks:
        slugs.update(
            (await session.execute(select(Stack.id, _STACK_SLUG).where(Stack.id.in_(missing_stacks)))).all()
        )
    people = dict(known_emails or {})
    missing_people = sorted(
        {u for r in runs for u in (r.created_by_id, r.approved_by_id) if u} - people.keys()
    )
    if missing_people:
        people.update(
            (u, e) for u, e in zip(missing_people, await emails(session, missing_people), strict=True) if e
        )
    steps: list[list[StepRecord]] = (
        [[] for _ in runs] if just_queued else await steps_of(session, [r.id for r in runs])
    )
    positions: dict[str, int | None] = dict(known_positions or {})
    queued = [r.id for r in runs if r.status == QUEUED]
    if known_positions is None and queued:
        positions = dict(zip(queued, await queue_positions(session, queued), strict=True))
    reasons = await _waiting_reasons(session, runs)
    return [
        RunDetails(
            run=run,
            stack_slug=slugs[run.stack_id],
            created_by=people.get(run.created_by_id or "") or run.trigger_actor,
            approved_by=people.get(run.approved_by_id or ""),
            steps=run_steps,
            queue_position=positions.get(run.id),
            waiting_for=reasons.get(run.id),
        )
        for run, run_steps in zip(runs, steps, strict=True)
    ]


# A deleted stack's runs name it by the slug it had (services/removal.py).
_STACK_SLUG = func.coalesce(Stack.deleted_slug, Stack.slug)
# Built once: aliases made per call would cost SQLAlchemy an adaptation of every column each time.
_creator, _approver = aliased(User, name="creator"), aliased(User, name="approver")
# The run's steps come in the same statement, one row each (a run has a handful).
# Whether a person's state lock holds the run back, in the run's own statement: a GET of a run
# is one statement unless it does (then a second one says whose lock, since when).
_PERSON_LOCKED = case(
    (
        and_(Run.status.in_(sorted(WAITS_FOR_STATE_LOCK)), ~Run.proposed),
        exists().where(StateHead.stack_id == Run.stack_id, held_by_person()),
    ),
    else_=False,
)

_DETAILS = (
    select(
        *RUN_COLUMNS,
        _STACK_SLUG,
        _creator.email,
        _approver.email,
        case((Run.status == QUEUED, _AHEAD)),
        _PERSON_LOCKED,
        *STEP_COLUMNS,
    )
    .join(Stack, Stack.id == Run.stack_id)
    .outerjoin(_creator, _creator.id == Run.created_by_id)
    .outerjoin(_approver, _approver.id == Run.approved_by_id)
    .outerjoin(RunStep, RunStep.run_id == Run.id)
    .where(Run.id == bindparam("run_id"), Run.org_id == bindparam("org_id"))
    .order_by(RunStep.position)
)


async def details_in_org(session: AsyncSession, org_id: str, run_id: str) -> RunDetails | None:
    """One run with its stack's slug, people's emails, queue position and steps, read in one
    statement: a GET of a run."""
    if not isinstance(run_id, str) or len(run_id) > 64:
        return None
    rows = await column_rows(session, _DETAILS, {"run_id": run_id, "org_id": org_id})
    if not rows:
        return None
    run = RunRecord(*rows[0][:_COLUMNS])
    slug, created_by, approved_by, position, person_locked = rows[0][_COLUMNS : _COLUMNS + 5]
    steps = [
        StepRecord(*row[_COLUMNS + 5 :])
        for row in rows
        if row[_COLUMNS + 5] is not None  # the step's run: a run without steps has one row of nulls
    ]
    return RunDetails(
        run=run,
        stack_slug=slug,
        created_by=created_by or run.trigger_actor,
        approved_by=approved_by,
        steps=steps,
        queue_position=int(position) if position is not None else None,
        waiting_for=(await _waiting_reasons(session, [run])).get(run.id) if person_locked else None,
    )
