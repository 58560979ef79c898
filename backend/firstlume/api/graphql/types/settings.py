"""Inherited settings and variables of an organization, a folder or a stack."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry import Private

from firstlume.api.graphql.enums import VariableKind
from firstlume.api.graphql.loaders import Loaders
from firstlume.domain.inheritance import Resolved
from firstlume.services import inherited
from firstlume.services.inherited import Scope
from firstlume.services.reads import Variable as VariableRecord


@strawberry.type
class ResolvedSetting:
    value: bool
    origin: str = strawberry.field(description='"default", "organization", "folder:<path>" or "stack".')


@strawberry.type
class EffectiveSettings:
    require_approval: ResolvedSetting
    confirm_destructive: ResolvedSetting

    @classmethod
    def of(cls, resolved: dict[str, Resolved]) -> EffectiveSettings:
        def one(name: str) -> ResolvedSetting:
            return ResolvedSetting(value=bool(resolved[name].value), origin=resolved[name].origin)

        return cls(require_approval=one("require_approval"), confirm_destructive=one("confirm_destructive"))


@strawberry.type(description="Values set at this level; null inherits.")
class ExplicitSettings:
    require_approval: bool | None
    confirm_destructive: bool | None


@strawberry.type
class Settings:
    scope: Private[Scope]
    loaders: Private[Loaders]

    @strawberry.field
    def explicit(self) -> ExplicitSettings:
        values = inherited.explicit_settings(self.scope)
        return ExplicitSettings(
            require_approval=values["require_approval"], confirm_destructive=values["confirm_destructive"]
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

    @strawberry.field
    def value(self) -> str | None:
        if self.row.sensitive:
            return None
        return inherited.reveal(self.loaders.ctx.keyring, self.row)

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
