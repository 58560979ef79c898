"""A plan's changes, worked out on a thread and written slice by slice as they come.

Working out the changes of a plan of 10,000 resources is a quarter of a second of pure Python,
and writing them (a COPY of 8,000 rows and 12 MB of JSON) about a tenth more, most of it the
database's. On a thread, the event loop keeps answering meanwhile (the interpreter switches every
few milliseconds), where the work would otherwise stall every request, probe and live log of the
process. In slices, the database takes in each slice while the next one is worked out, instead of
all of them after the last.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.bulk import ChangeRecord, change_records, insert_change_records
from firstlume.domain.changes import Change, OutputChange, iter_changes, output_changes_from_plan

# Changes per slice: a few dozen milliseconds of work each, so the last one, which the answer
# waits for, is short.
SLICE = 1000


class PlanChanges:
    """Started with `start` (the thread begins at once); `write` then writes the slices in the
    session's transaction as the thread makes them and returns every change, or raises what the
    plan's shape raised (AttributeError, KeyError, TypeError, ValueError)."""

    def __init__(self, run_id: str, plan_json: dict[str, Any], secrets: list[Any]) -> None:
        self.run_id = run_id
        self.plan_json = plan_json
        self.secrets = secrets
        self._slices: asyncio.Queue[list[ChangeRecord] | None] = asyncio.Queue()
        self._computing: asyncio.Future[list[Change]] | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._computing = asyncio.ensure_future(asyncio.to_thread(self._compute, loop))

    async def write(self, session: AsyncSession) -> list[Change]:
        assert self._computing is not None, "start() first"
        while (records := await self._slices.get()) is not None:
            await insert_change_records(session, records)
        return await self._computing

    async def abandon(self) -> None:
        """The upload failed before `write`: waits for the thread (it cannot be stopped)."""
        if self._computing is not None:
            await asyncio.gather(self._computing, return_exceptions=True)

    def _compute(self, loop: asyncio.AbstractEventLoop) -> list[Change]:
        changes: list[Change] = []
        try:
            pending: list[Change] = []
            for change in _changes_of_units(self.plan_json, self.secrets):
                changes.append(change)
                pending.append(change)
                if len(pending) == SLICE:
                    self._hand_over(loop, changes, pending)
                    pending = []
            if pending:
                self._hand_over(loop, changes, pending)
        finally:
            # The end, or a failure (which `write` then raises from the thread's result).
            loop.call_soon_threadsafe(self._slices.put_nowait, None)
        return changes

    def _hand_over(
        self, loop: asyncio.AbstractEventLoop, changes: list[Change], pending: list[Change]
    ) -> None:
        """The rows of `pending`, the last changes of `changes` so far, to the writing loop."""
        records = change_records(self.run_id, pending, len(changes) - len(pending))
        loop.call_soon_threadsafe(self._slices.put_nowait, records)


def _plans_of_units(plan_json: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One Terraform root's plan, or Terragrunt `run --all` plans keyed by unit path."""
    units = plan_json.get("terragrunt_units")
    plans = sorted(units.items()) if isinstance(units, dict) else [(".", plan_json)]
    for _, plan in plans:
        if not isinstance(plan, dict) or not isinstance(plan.get("format_version"), str):
            raise ValueError("it has no format_version, as `show -json` output always does")
    return plans


def _changes_of_units(plan_json: dict[str, Any], secrets: list[Any]) -> Iterator[Change]:
    for unit, plan in _plans_of_units(plan_json):
        yield from iter_changes(plan, unit=unit, secrets=secrets)


def output_changes(plan_json: dict[str, Any], secrets: list[Any]) -> list[OutputChange]:
    """The outputs each unit's plan changes (a few per plan: worked out on the loop)."""
    return [
        change
        for unit, plan in _plans_of_units(plan_json)
        for change in output_changes_from_plan(plan, unit=unit, secrets=secrets)
    ]
