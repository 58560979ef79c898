"""A run's planned changes: counted per group, filtered and paged on the server.

Changes are plain objects built from the read layer's records in one pass: no field of a change
has a resolver of its own, so a page costs one object per change and attribute.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import strawberry
from strawberry import Private
from strawberry.scalars import JSON

from firstlume.api.graphql.enums import ChangeAction, ResourceState
from firstlume.api.graphql.loaders import Loaders
from firstlume.api.graphql.pacing import paced
from firstlume.api.graphql.types.pagination import PageInfo
from firstlume.domain.changes import GROUPS, Summary
from firstlume.domain.drift import drift_finding
from firstlume.services.reads.changes import ChangePage, ChangePageKey, ChangeRecord, OutputChangeRecord

TITLES = dict(GROUPS)


@strawberry.type
class ChangeSummary:
    delete: int
    replace: int
    update: int
    create: int
    outputs: int = strawberry.field(description="Root module outputs the plan creates, updates or deletes.")
    text: str = strawberry.field(
        description='"1 delete · 1 replace · 2 update · 2 create · 1 output change", or "no changes".'
    )

    @classmethod
    def of(cls, summary: Summary) -> ChangeSummary:
        return cls(
            delete=summary.delete,
            replace=summary.replace,
            update=summary.update,
            create=summary.create,
            outputs=summary.outputs,
            text=summary.text,
        )


@strawberry.type
class AttributeChange:
    name: str
    before: JSON | None = strawberry.field(description='"(sensitive)" for sensitive values.')
    after: JSON | None = strawberry.field(
        description='"(sensitive)"; "(sensitive value changed)" where both sides are sensitive and the '
        'digests of the two values differ (neither value is sent); or "(known after apply)".'
    )
    forces_replacement: bool


@strawberry.type
class ReplaceStage:
    action: ChangeAction
    state: ResourceState | None


def _state(value: Any) -> ResourceState | None:
    return ResourceState(value) if value is not None else None


@strawberry.type
class ResourceChange:
    address: str
    type: str
    unit: str = strawberry.field(
        description='"." for a single root; the unit\'s path with Terragrunt run --all.'
    )
    action: ChangeAction
    attributes: list[AttributeChange] = strawberry.field(description="Only the attributes that change.")
    replaced_because: list[str] = strawberry.field(
        description="What forces a replacement (replacements only)."
    )
    state: ResourceState | None
    error: str | None = strawberry.field(description="Terraform's error on this resource, when it failed.")
    stages: list[ReplaceStage] = strawberry.field(
        description="A replacement's two stages, in the order they ran."
    )

    @classmethod
    def of(cls, record: ChangeRecord) -> ResourceChange:
        replace = record.action == "replace"
        return cls(
            address=record.address,
            type=record.type,
            unit=record.unit,
            action=ChangeAction(record.action),
            attributes=[
                AttributeChange(
                    name=a["name"],
                    before=a["before"],
                    after=a["after"],
                    forces_replacement=bool(a["forces_replacement"]),
                )
                for a in record.attributes
            ],
            replaced_because=record.replaced_because if replace else [],
            state=_state(record.state),
            error=record.error,
            stages=[
                ReplaceStage(action=ChangeAction(s["action"]), state=_state(s.get("state")))
                for s in record.stages
            ]
            if replace
            else [],
        )


@strawberry.type(
    description="A root module output the plan creates, updates or deletes: applying the plan saves it "
    "in the state."
)
class OutputChange:
    name: str
    unit: str = strawberry.field(description='"." for a single root; the unit\'s path with Terragrunt.')
    action: ChangeAction = strawberry.field(description="create, update or delete.")
    before: JSON | None = strawberry.field(description='"(sensitive)" for a sensitive output.')
    after: JSON | None = strawberry.field(description='"(sensitive)", or "(known after apply)".')
    sensitive: bool

    @classmethod
    def of(cls, record: OutputChangeRecord) -> OutputChange:
        return cls(
            name=record.name,
            unit=record.unit,
            action=ChangeAction(record.action),
            before=record.before,
            after=record.after,
            sensitive=record.sensitive,
        )


@strawberry.type(
    description="How many of the run's changes are in each state of the apply, whatever the filters "
    '("198 done, 2 failed, 1 not applied"); pending counts the changes no apply has reached.'
)
class ChangeOutcome:
    pending: int
    applying: int
    done: int
    failed: int
    not_applied: int


@strawberry.type(description="How many changes of each group match the filters.")
class ChangeCounts:
    delete: int
    replace: int
    update: int
    create: int
    total: int


@strawberry.type(
    description="A page of a run's changes, in the order of the groups (delete, replace, update, create) "
    "and the plan's order within a group, with counts per group."
)
class Changes:
    key: Private[ChangePageKey]
    loaders: Private[Loaders]
    summary: ChangeSummary = strawberry.field(description="Every change of the run, whatever the filters.")
    # A drift run's groups say what drifted ("Deleted outside Terraform"), not what a plan does.
    drift: Private[bool] = False

    async def read_page(self) -> ChangePage:
        return await self.loaders.change_page.load(self.key)

    async def _counts(self) -> dict[str, int]:
        return await self.loaders.change_counts.load((self.key.run_id, self.key.filter))

    @strawberry.field
    async def counts(self) -> ChangeCounts:
        counts = await self._counts()
        return ChangeCounts(**counts, total=sum(counts.values()))

    @strawberry.field(description="How many changes match the filters.")
    async def total_count(self) -> int:
        return sum((await self._counts()).values())

    # A page holds up to 10,000 changes: each is built when it is reached and completed one by
    # one, sharing the event loop (pacing.py).
    @strawberry.field(description="This page's changes.", graphql_type=list[ResourceChange])
    async def nodes(self) -> AsyncIterator[ResourceChange]:
        return paced(ResourceChange.of(r) for r in (await self.read_page()).records)

    @strawberry.field
    async def page_info(self) -> PageInfo:
        page = await self.read_page()
        return PageInfo(has_next_page=page.has_next_page, end_cursor=page.end_cursor)

    @strawberry.field(description="Always four, in order: delete, replace, update, create.")
    async def groups(self) -> list[ChangeGroup]:
        counts = await self._counts()
        totals = self.summary
        return [
            ChangeGroup(
                action=ChangeAction(action),
                title=drift_finding(action) if self.drift else title,
                count=counts[action],
                total=getattr(totals, action),
                of=self,
            )
            for action, title in GROUPS
        ]

    @strawberry.field(description="Every output the plan changes (the filters apply to resources only).")
    async def outputs(self) -> list[OutputChange]:
        return [OutputChange.of(r) for r in await self.loaders.output_changes.load(self.key.run_id)]

    @strawberry.field(description="The changes' states in the apply, whatever the filters.")
    async def outcome(self) -> ChangeOutcome:
        return ChangeOutcome(**await self.loaders.change_states.load(self.key.run_id))

    @strawberry.field(description="The resource types among all of the run's changes, for a filter.")
    async def types(self) -> list[str]:
        return (await self.loaders.change_facets.load(self.key.run_id)).types

    @strawberry.field(description="The units among all of the run's changes, for a filter.")
    async def units(self) -> list[str]:
        return (await self.loaders.change_facets.load(self.key.run_id)).units


@strawberry.type
class ChangeGroup:
    action: ChangeAction
    title: str = strawberry.field(
        description='"Will be deleted", "Will be replaced", …; a drift run\'s say what drifted: '
        '"Deleted outside Terraform", "Changed outside Terraform", …'
    )
    count: int = strawberry.field(description="How many of the group's changes match the filters.")
    total: int = strawberry.field(description="How many changes the group holds, whatever the filters.")
    of: Private[Changes]

    @strawberry.field(description="The group's changes on this page.", graphql_type=list[ResourceChange])
    async def changes(self) -> AsyncIterator[ResourceChange]:
        action = self.action.value
        records = (await self.of.read_page()).records
        return paced(ResourceChange.of(r) for r in records if r.action == action)
