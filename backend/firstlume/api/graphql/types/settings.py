"""Inherited settings and variables of an organization, a folder or a stack."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry import Private
from strawberry.scalars import JSON

from firstlume.api.graphql.enums import ForkPolicy, VariableKind
from firstlume.api.graphql.loaders import Loaders
from firstlume.domain.inheritance import SETTING_NAMES, Resolved, stacks_reached
from firstlume.services import inherited
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord
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

    @strawberry.field(
        description="For each setting, how many stacks take it from this level: those under it that "
        "neither set it themselves nor sit in a nearer folder that does (1 or 0 for a stack). What a "
        'confirmation of a change names: "applies to 14 stacks under prod/".'
    )
    async def reach(self) -> list[SettingReach]:
        scope = self.scope
        if isinstance(scope, StackRecord):
            return [SettingReach(setting=name, stacks=1) for name in SETTING_NAMES]
        org_id = scope.id if isinstance(scope, OrganizationRecord) else scope.org_id
        level = None if isinstance(scope, OrganizationRecord) else scope.path
        folders = await self.loaders.org_folders.load(org_id)
        stacks = await self.loaders.org_stacks.load(org_id)
        paths = {f.id: f.path for f in folders}
        return [
            SettingReach(
                setting=name,
                stacks=stacks_reached(
                    level,
                    [(paths.get(s.folder_id) if s.folder_id else None, getattr(s, name)) for s in stacks],
                    {f.path: getattr(f, name) for f in folders},
                ),
            )
            for name in SETTING_NAMES
        ]


@strawberry.type(description="How many stacks take a setting from a level.")
class SettingReach:
    setting: str = strawberry.field(description="The setting's name, such as require_approval.")
    stacks: int


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
