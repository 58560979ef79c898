"""What the HCP Terraform API's ids name: the organization each belongs to (its requests are
authenticated there, so that another organization's id is a 404 like a missing one), the run's
CLI record, and the text of a phase's log."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import LogChunk, Organization, Run, Stack, StateHead, StateVersion
from firstlume.db.models_cli import CliRun, ConfigurationVersion
from firstlume.domain.errors import NotFound

MAX_ID = 64


@dataclass(frozen=True)
class Owner:
    org_slug: str
    stack_slug: str
    stack_id: str


async def _owner(session: AsyncSession, stack_id: object, what: str, given: str) -> Owner:
    row = (
        await session.execute(
            select(Organization.slug, Stack.slug, Stack.id)
            .join(Stack, Stack.org_id == Organization.id)
            .where(Stack.id == stack_id, Stack.deleted_at.is_(None))
        )
    ).first()
    if row is None:
        raise NotFound(f"No {what} '{given}'.")
    return Owner(row[0], row[1], row[2])


def _plain(given: str, prefix: str, what: str) -> str:
    if not given.startswith(prefix) or len(given) > MAX_ID + len(prefix):
        raise NotFound(f"No {what} '{given}'.")
    return given.removeprefix(prefix)


async def workspace_owner(session: AsyncSession, workspace_id: str) -> Owner:
    return await _owner(session, _plain(workspace_id, "ws-", "workspace"), "workspace", workspace_id)


async def run_owner(session: AsyncSession, run_id: str, prefix: str = "run-", what: str = "run") -> Owner:
    plain = _plain(run_id, prefix, what)
    stack_id = await session.scalar(select(Run.stack_id).where(Run.id == plain))
    return await _owner(session, stack_id, what, run_id)


async def configuration_version_owner(session: AsyncSession, cv_id: str) -> Owner:
    plain = _plain(cv_id, "cv-", "configuration version")
    stack_id = await session.scalar(
        select(ConfigurationVersion.stack_id).where(ConfigurationVersion.id == plain)
    )
    return await _owner(session, stack_id, "configuration version", cv_id)


async def state_version_owner(session: AsyncSession, sv_id: str) -> tuple[Owner, int]:
    plain = _plain(sv_id, "sv-", "state version")
    row = (
        await session.execute(
            select(StateHead.stack_id, StateVersion.serial)
            .join(StateHead, StateHead.id == StateVersion.head_id)
            .where(StateVersion.id == (int(plain) if plain.isdigit() and len(plain) < 18 else -1))
        )
    ).first()
    if row is None:
        raise NotFound(f"No state version '{sv_id}'.")
    return await _owner(session, row[0], "state version", sv_id), int(row[1])


async def current_version_id(session: AsyncSession, stack_id: str) -> tuple[int, int] | None:
    """The root module's current state version: (its row id, its serial)."""
    row = (
        await session.execute(
            select(StateVersion.id, StateVersion.serial)
            .join(StateHead, StateHead.id == StateVersion.head_id)
            .where(
                StateHead.stack_id == stack_id, StateHead.unit == ".", StateHead.serial == StateVersion.serial
            )
        )
    ).first()
    return (int(row[0]), int(row[1])) if row else None


async def run_row(session: AsyncSession, run_id: str) -> Run:
    run = await session.get(Run, run_id)
    if run is None:
        raise NotFound(f"No run 'run-{run_id}'.")
    return run


async def cli_run(session: AsyncSession, run_id: str) -> CliRun | None:
    return await session.get(CliRun, run_id)


async def log_text(session: AsyncSession, run_id: str, steps: tuple[str, ...]) -> str:
    """The text a phase's steps logged so far, in order."""
    chunks = await session.scalars(
        select(LogChunk.text)
        .where(LogChunk.run_id == run_id, LogChunk.step.in_(steps))
        .order_by(LogChunk.offset)
    )
    return "".join(chunks)


async def workspace_runs(session: AsyncSession, stack_id: str, limit: int) -> list[Run]:
    return list(
        await session.scalars(
            select(Run).where(Run.stack_id == stack_id).order_by(Run.number.desc()).limit(limit)
        )
    )
