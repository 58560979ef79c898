"""Reads of a run's planned changes: all of them (REST), or counted, filtered and paged (GraphQL).

Rows are read as plain column tuples, never ORM objects: a plan may hold tens of thousands of
changes. The JSON columns (attributes, replaced_because, stages) are read as their stored text,
so whoever only passes them on (the REST document) never parses them.

Pages run through the four groups in their documented order (delete, replace, update, create)
and through the plan's order within a group; a cursor is the group's rank and the position of
the last change returned, so it stays valid whatever the filters.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Select, Text, and_, case, cast, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import OutputChange, ResourceChange
from firstlume.domain.changes import GROUPS
from firstlume.domain.errors import InvalidRequest
from firstlume.domain.runs import ResourceState
from firstlume.services.reads.rows import column_rows

Q = TypeVar("Q", bound=Select[*tuple[Any, ...]])

ACTIONS = tuple(action for action, _ in GROUPS)
STATES = tuple(state.value for state in ResourceState)
RANK = {action: rank for rank, action in enumerate(ACTIONS)}
CURSOR = re.compile(r"([0-3])\.([0-9]{1,9})")
MAX_TEXT = 1000

C = ResourceChange
O = OutputChange
_group_rank = case(*((C.action == action, rank) for action, rank in RANK.items()), else_=len(ACTIONS))


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    """One planned change; the *_json fields hold the stored JSON text."""

    position: int
    address: str
    type: str
    unit: str
    action: str
    attributes_json: str
    replaced_because_json: str
    state: str | None
    error: str | None
    stages_json: str

    @property
    def attributes(self) -> list[dict[str, Any]]:
        return json.loads(self.attributes_json)  # type: ignore[no-any-return]

    @property
    def replaced_because(self) -> list[str]:
        return json.loads(self.replaced_because_json)  # type: ignore[no-any-return]

    @property
    def stages(self) -> list[dict[str, Any]]:
        return json.loads(self.stages_json)  # type: ignore[no-any-return]


# The JSON columns as text: PostgreSQL's driver would otherwise parse every value.
_COLUMNS = (
    C.position,
    C.address,
    C.type,
    C.unit,
    C.action,
    cast(C.attributes, Text).label("attributes_json"),
    cast(C.replaced_because, Text).label("replaced_because_json"),
    C.state,
    C.error,
    cast(C.stages, Text).label("stages_json"),
)
_NAMES = ("run_id", *(column.key for column in _COLUMNS))


def _records(rows: Any) -> list[ChangeRecord]:
    return [ChangeRecord(*row) for row in rows]


@dataclass(frozen=True)
class ChangeFilter:
    """Which changes to count and page; None means any. `text` is a case-insensitive substring
    of the address; `state` the change's state in the apply (pending also matches a change no
    apply has reached yet)."""

    action: str | None = None
    type: str | None = None
    unit: str | None = None
    text: str | None = None
    state: str | None = None

    def __post_init__(self) -> None:
        if self.action is not None and self.action not in RANK:
            raise InvalidRequest(f"'action' must be one of {', '.join(ACTIONS)}.", field="action")
        if self.state is not None and self.state not in STATES:
            raise InvalidRequest(f"'state' must be one of {', '.join(STATES)}.", field="state")
        if self.text is not None and len(self.text) > MAX_TEXT:
            raise InvalidRequest(f"'text' must be at most {MAX_TEXT} characters.", field="text")

    def apply(self, query: Q) -> Q:
        if self.action is not None:
            query = query.where(C.action == self.action)
        if self.type is not None:
            query = query.where(C.type == self.type)
        if self.unit is not None:
            query = query.where(C.unit == self.unit)
        if self.text:
            query = query.where(C.address.icontains(self.text, autoescape=True))
        if self.state == ResourceState.PENDING:
            query = query.where(or_(C.state == self.state, C.state.is_(None)))
        elif self.state is not None:
            query = query.where(C.state == self.state)
        return query


@dataclass(frozen=True)
class Cursor:
    rank: int
    position: int

    @classmethod
    def parse(cls, text: str) -> Cursor:
        match = CURSOR.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise InvalidRequest(
                f"'after' must be a cursor from pageInfo.endCursor; got {text!r}.", field="after"
            )
        return cls(int(match[1]), int(match[2]))

    @classmethod
    def of(cls, record: ChangeRecord) -> Cursor:
        return cls(RANK[record.action], record.position)

    def __str__(self) -> str:
        return f"{self.rank}.{self.position}"


@dataclass(frozen=True)
class ChangePageKey:
    run_id: str
    first: int
    after: Cursor | None
    filter: ChangeFilter


@dataclass(frozen=True)
class ChangePage:
    records: list[ChangeRecord]
    has_next_page: bool

    @property
    def end_cursor(self) -> str | None:
        return str(Cursor.of(self.records[-1])) if self.records else None


# All of a run's changes ------------------------------------------------------------------------


async def all_changes(session: AsyncSession, run_id: str) -> list[ChangeRecord]:
    """Every change of the run in plan order."""
    rows = await column_rows(session, select(*_COLUMNS).where(C.run_id == run_id).order_by(C.position))
    return _records(rows)


async def changes_at(
    session: AsyncSession, run_id: str, addresses: Sequence[str] | None
) -> list[ChangeRecord]:
    """The run's changes at these addresses (all of them for None), in plan order."""
    query = select(*_COLUMNS).where(C.run_id == run_id)
    if addresses is not None:
        query = query.where(C.address.in_(list(addresses)))
    return _records(await column_rows(session, query.order_by(C.position)))


# Counts, facets and pages, for many runs at once ------------------------------------------------


async def counts(
    session: AsyncSession, run_ids: Sequence[str], change_filter: ChangeFilter
) -> list[dict[str, int]]:
    """For each run, how many changes of each action match the filter (every action present)."""
    query = change_filter.apply(
        select(C.run_id, C.action, func.count())
        .where(C.run_id.in_(set(run_ids)))
        .group_by(C.run_id, C.action)
    )
    found: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(ACTIONS, 0))
    for run_id, action, count in await column_rows(session, query):
        if action in RANK:
            found[run_id][action] = int(count)
    return [dict(found[run_id]) for run_id in run_ids]


async def state_counts(session: AsyncSession, run_ids: Sequence[str]) -> list[dict[str, int]]:
    """For each run, how many of its changes are in each apply state, whatever the filters (a
    change no apply has reached counts as pending)."""
    rows = await column_rows(
        session,
        select(C.run_id, C.state, func.count()).where(C.run_id.in_(set(run_ids))).group_by(C.run_id, C.state),
    )
    found: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(STATES, 0))
    for run_id, state, count in rows:
        key = state if state in STATES else ResourceState.PENDING.value
        found[run_id][key] += int(count)
    return [dict(found[run_id]) for run_id in run_ids]


@dataclass(frozen=True)
class Facets:
    """What a filter can choose from: the distinct resource types and units of a run's changes."""

    types: list[str]
    units: list[str]


async def facets(session: AsyncSession, run_ids: Sequence[str]) -> list[Facets]:
    rows = await column_rows(
        session, select(C.run_id, C.type, C.unit).where(C.run_id.in_(set(run_ids))).distinct()
    )
    types: dict[str, set[str]] = defaultdict(set)
    units: dict[str, set[str]] = defaultdict(set)
    for run_id, resource_type, unit in rows:
        types[run_id].add(resource_type)
        units[run_id].add(unit)
    return [Facets(sorted(types.get(i, ())), sorted(units.get(i, ()))) for i in run_ids]


async def pages(session: AsyncSession, keys: Sequence[ChangePageKey]) -> list[ChangePage]:
    """A page per key, one statement per distinct page shape (size, cursor, filter)."""
    shapes: dict[tuple[int, Cursor | None, ChangeFilter], list[str]] = defaultdict(list)
    for key in keys:
        shapes[(key.first, key.after, key.filter)].append(key.run_id)
    found: dict[ChangePageKey, ChangePage] = {}
    for (first, after, change_filter), run_ids in shapes.items():
        query = change_filter.apply(select(C.run_id, *_COLUMNS).where(C.run_id.in_(set(run_ids))))
        if after is not None:
            query = query.where(
                or_(_group_rank > after.rank, and_(_group_rank == after.rank, C.position > after.position))
            )
        if len(run_ids) == 1:
            rows = await column_rows(session, query.order_by(_group_rank, C.position).limit(first + 1))
        else:
            # Several runs: number each run's matches in page order and keep the first of each.
            rank = func.row_number().over(partition_by=C.run_id, order_by=(_group_rank, C.position))
            ranked = query.add_columns(rank.label("rn")).subquery()
            rows = await column_rows(
                session,
                select(*(ranked.c[name] for name in _NAMES))
                .where(ranked.c.rn <= first + 1)
                .order_by(ranked.c.run_id, ranked.c.rn),
            )
        by_run: dict[str, list[ChangeRecord]] = defaultdict(list)
        for run_id, *values in rows:
            by_run[run_id].append(ChangeRecord(*values))
        for run_id in run_ids:
            records = by_run.get(run_id, [])
            found[ChangePageKey(run_id, first, after, change_filter)] = ChangePage(
                records=records[:first], has_next_page=len(records) > first
            )
    return [found[key] for key in keys]


# Outputs ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutputChangeRecord:
    """A root module output the plan changes; its values as shown ("(sensitive)" when it is)."""

    run_id: str
    unit: str
    name: str
    action: str
    before: Any
    after: Any
    sensitive: bool


_OUTPUT_COLUMNS = (O.run_id, O.unit, O.name, O.action, O.before, O.after, O.sensitive)


async def output_changes(session: AsyncSession, run_ids: Sequence[str]) -> list[list[OutputChangeRecord]]:
    """Each run's output changes, in the plan's order (by unit, then name)."""
    rows = await column_rows(
        session,
        select(*_OUTPUT_COLUMNS).where(O.run_id.in_(set(run_ids))).order_by(O.run_id, O.position),
    )
    found: dict[str, list[OutputChangeRecord]] = defaultdict(list)
    for row in rows:
        found[row[0]].append(OutputChangeRecord(*row))
    return [found.get(run_id, []) for run_id in run_ids]
