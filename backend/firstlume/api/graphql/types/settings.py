"""Inherited settings and variables of an organization, a folder or a stack."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry import Private
from strawberry.scalars import JSON

from firstlume.api.graphql.enums import ForkPolicy, VariableKind
from firstlume.api.graphql.loaders import Loaders
from firstlume.domain.inheritance import Resolved
from firstlume.services import inherited
from firstlume.services.reads.settings import Scope, VariableRecord, explicit_settings


@strawberry.type
class ResolvedSetting:
    value: bool
    origin: str = strawberry.field(description='"default", "organization", "folder:<path>" or "stack".')


ORIGIN = '"default", "organization", "folder:<path>" or "stack".'


@strawberry.type
class ResolvedSchedule:
    value: str | None = strawberry.field(description="A cron schedule (UTC), or null: none.")
    origin: str = strawberry.field(description=ORIGIN)


@strawberry.type
class ResolvedPrincipals:
    value: list[str] | None = strawberry.field(
        description='"user:<email>" and "group:<name>" entries, or null: any operator or admin.'
    )
    origin: str = strawberry.field(description=ORIGIN)


@strawberry.type
class ResolvedPolicies:
    value: list[str] | None = strawberry.field(
        description="The names of the policies evaluated at the end of each plan, or null: none."
    )
    origin: str = strawberry.field(description=ORIGIN)


@strawberry.type
class ResolvedForkPolicy:
    value: ForkPolicy
    origin: str = strawberry.field(description=ORIGIN)


@strawberry.type
class EffectiveSettings:
    require_approval: ResolvedSetting
    confirm_destructive: ResolvedSetting
    drift_schedule: ResolvedSchedule
    approvers: ResolvedPrincipals
    forbid_self_approval: ResolvedSetting
    policies: ResolvedPolicies
    pull_requests_from_forks: ResolvedForkPolicy

    @classmethod
    def of(cls, resolved: dict[str, Resolved]) -> EffectiveSettings:
        def flag(name: str) -> ResolvedSetting:
            return ResolvedSetting(value=bool(resolved[name].value), origin=resolved[name].origin)

        approvers = resolved["approvers"]
        return cls(
            require_approval=flag("require_approval"),
            confirm_destructive=flag("confirm_destructive"),
            drift_schedule=ResolvedSchedule(
                value=resolved["drift_schedule"].value, origin=resolved["drift_schedule"].origin
            ),
            approvers=ResolvedPrincipals(
                value=list(approvers.value) if approvers.value is not None else None, origin=approvers.origin
            ),
            forbid_self_approval=flag("forbid_self_approval"),
            policies=ResolvedPolicies(
                value=list(resolved["policies"].value) if resolved["policies"].value is not None else None,
                origin=resolved["policies"].origin,
            ),
            pull_requests_from_forks=ResolvedForkPolicy(
                value=ForkPolicy(resolved["pull_requests_from_forks"].value),
                origin=resolved["pull_requests_from_forks"].origin,
            ),
        )


@strawberry.type(description="Values set at this level; null inherits.")
class ExplicitSettings:
    require_approval: bool | None
    confirm_destructive: bool | None
    drift_schedule: str | None
    approvers: list[str] | None
    forbid_self_approval: bool | None
    policies: list[str] | None
    pull_requests_from_forks: ForkPolicy | None


@strawberry.type
class Settings:
    scope: Private[Scope]
    loaders: Private[Loaders]

    @strawberry.field
    def explicit(self) -> ExplicitSettings:
        explicit = explicit_settings(self.scope)
        forks = explicit["pull_requests_from_forks"]
        return ExplicitSettings(
            **{**explicit, "pull_requests_from_forks": ForkPolicy(forks) if forks else None}
        )

    @strawberry.field
    async def effective(self) -> EffectiveSettings:
        return EffectiveSettings.of(await self.loaders.effective_settings.load(self.scope))


@strawberry.type(description="A variable set at one level. A sensitive value is write-only: `value` is null.")
class Variable:
    row: Private[VariableRecord]
    loaders: Private[Loaders]

    @strawberry.field
    def name(self) -> str:
        return self.row.name

    @strawberry.field(
        description="The value as it was set (a string, number, boolean, list or object); null when sensitive."
    )
    def value(self) -> JSON | None:
        if self.row.sensitive:
            return None
        value: JSON = inherited.revealed_value(self.loaders.ctx.keyring, self.row)
        return value

    @strawberry.field
    def sensitive(self) -> bool:
        return self.row.sensitive

    @strawberry.field
    def kind(self) -> VariableKind:
        return VariableKind(self.row.kind)

    @strawberry.field
    def updated_at(self) -> datetime:
        return self.row.updated_at


async def variables_of(loaders: Loaders, scope: Scope) -> list[Variable]:
    return [Variable(row=v, loaders=loaders) for v in await loaders.variables.load(scope)]
