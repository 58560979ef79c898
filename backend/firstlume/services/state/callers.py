"""Who touches a stack's state: a person by API token, or an executor by its phase token,
which reaches only its own run's stack, and only while its phase runs."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Organization, Stack
from firstlume.domain.errors import Forbidden, NotFound
from firstlume.domain.runs import Phase
from firstlume.services import accounts, catalog
from firstlume.services.access.permissions import Need
from firstlume.services.context import Actor
from firstlume.services.execution import authenticate_phase
from firstlume.services.reads.catalog import ORG_COLUMNS, STACK_COLUMNS, OrganizationRecord, StackRecord
from firstlume.services.reads.rows import column_rows

PHASE_TOKEN_PREFIX = "flx_"


@dataclass(frozen=True)
class StateCaller:
    """A person (`actor`), or a run's phase (the run's id and number, and the `phase`)."""

    org: OrganizationRecord
    stack: StackRecord
    actor: Actor | None = None
    run_id: str | None = None
    run_number: int | None = None
    phase: Phase | None = None

    @property
    def name(self) -> str:
        """Who, as the lock and the versions show it."""
        if self.actor is not None:
            return self.actor.email
        return f"run #{self.run_number} ({self.phase} phase)"

    def require_person(self, what: str) -> None:
        """What only people may do: an executor's token reads, writes and locks, nothing more."""
        if self.actor is None:
            raise Forbidden(f"An executor's phase token cannot {what}; a person's token can (admin).")


async def state_caller(
    session: AsyncSession, token: str | None, org_slug: str, stack_slug: str, need: Need
) -> StateCaller:
    """The caller of a state route: an executor's phase token (its own checks), or a person's
    token, who needs `need` (the permission table's) in the organization."""
    if token and token.startswith(PHASE_TOKEN_PREFIX):
        run, phase_token = await authenticate_phase(session, token)
        found = await column_rows(
            session,
            select(*ORG_COLUMNS, *STACK_COLUMNS)
            .join(Stack, Stack.org_id == Organization.id)
            .where(Stack.id == run.stack_id, Organization.slug == org_slug, Stack.slug == stack_slug),
        )
        if not found:
            # Another stack's state does not exist for an executor: the same answer as a missing one.
            raise NotFound(f"No stack '{stack_slug}'.")
        org = OrganizationRecord(*found[0][: len(ORG_COLUMNS)])
        stack = StackRecord(*found[0][len(ORG_COLUMNS) :])
        return StateCaller(
            org=org, stack=stack, run_id=run.id, run_number=run.number, phase=Phase(phase_token.phase)
        )
    actor, org = await accounts.authenticate_in_org(session, token, org_slug, need)
    stack = await catalog.stack_by_slug(session, org, stack_slug)
    return StateCaller(org=org, stack=stack, actor=actor)
