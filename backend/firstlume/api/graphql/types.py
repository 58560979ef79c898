"""The object types of the schema. Each wraps a database row and the Loaders of its operation
(or subscription event), and reads related rows only through those loaders."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from enum import Enum
from typing import Any

import strawberry
from sqlalchemy import select
from strawberry import Private
from strawberry.scalars import JSON

from firstlume.api.graphql.enums import ChangeAction, GitAuth, ResourceState, StepStatus, VariableKind
from firstlume.api.graphql.loaders import Loaders, RunPageKey
from firstlume.api.rest.serializers import duration_ms, run_summary
from firstlume.db import models
from firstlume.domain.changes import GROUPS
from firstlume.domain.errors import InvalidRequest
from firstlume.domain.inheritance import Resolved
from firstlume.domain.runs import FINISHED, RunStatus, RunType
from firstlume.services import accounts, inherited
from firstlume.services.context import Actor
from firstlume.services.inherited import Scope
from firstlume.services.logs import read_log

MAX_PAGE_SIZE = 100
CURSOR = re.compile(r"[0-9]{1,9}")
DEFAULT_PAGE_SIZE = 20


def _optional_enum(enum: type[Enum], value: str | None) -> Any:
    return enum(value) if value is not None else None


# Settings and variables ---------------------------------------------------------------------


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
    row: Private[models.Variable]
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


async def _variables(loaders: Loaders, scope: Scope) -> list[Variable]:
    return [Variable(row=v, loaders=loaders) for v in await loaders.variables.load(scope)]


# Organizations, folders, stacks ---------------------------------------------------------------


@strawberry.type
class Viewer:
    actor: Private[Actor]
    loaders: Private[Loaders]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(self.actor.user_id)

    @strawberry.field
    def email(self) -> str:
        return self.actor.email

    @strawberry.field
    async def organizations(self) -> list[Organization]:
        async with self.loaders.ctx.db.transaction() as session:
            orgs = await accounts.orgs_of(session, self.actor)
        return [Organization(row=o, loaders=self.loaders) for o in orgs]


@strawberry.type
class Organization:
    row: Private[models.Organization]
    loaders: Private[Loaders]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(self.row.id)

    @strawberry.field
    def slug(self) -> str:
        return self.row.slug

    @strawberry.field
    def name(self) -> str:
        return self.row.name

    @strawberry.field(description="Every folder, by path.")
    async def folders(self) -> list[Folder]:
        return [Folder(row=f, loaders=self.loaders) for f in await self.loaders.org_folders.load(self.row.id)]

    @strawberry.field(description="The top of the tree: folders without a parent.")
    async def root_folders(self) -> list[Folder]:
        return [
            Folder(row=f, loaders=self.loaders)
            for f in await self.loaders.org_folders.load(self.row.id)
            if f.parent_id is None
        ]

    @strawberry.field
    async def folder(self, path: str) -> Folder | None:
        async with self.loaders.ctx.db.transaction() as session:
            row = await session.scalar(
                select(models.Folder).where(
                    models.Folder.org_id == self.row.id, models.Folder.path == path.strip("/")
                )
            )
        if row is None:
            return None
        self.loaders.seen([row])
        return Folder(row=row, loaders=self.loaders)

    @strawberry.field(description="Every stack, by slug.")
    async def stacks(self) -> list[Stack]:
        return [Stack(row=s, loaders=self.loaders) for s in await self.loaders.org_stacks.load(self.row.id)]

    @strawberry.field(description="Stacks at the top of the tree, in no folder.")
    async def root_stacks(self) -> list[Stack]:
        return [
            Stack(row=s, loaders=self.loaders)
            for s in await self.loaders.org_stacks.load(self.row.id)
            if s.folder_id is None
        ]

    @strawberry.field
    async def stack(self, slug: str) -> Stack | None:
        async with self.loaders.ctx.db.transaction() as session:
            row = await session.scalar(
                select(models.Stack).where(models.Stack.org_id == self.row.id, models.Stack.slug == slug)
            )
        if row is None:
            return None
        self.loaders.seen([row])
        return Stack(row=row, loaders=self.loaders)

    @strawberry.field
    async def run(self, id: strawberry.ID) -> Run | None:
        async with self.loaders.ctx.db.transaction() as session:
            row = await session.scalar(
                select(models.Run).where(models.Run.id == str(id), models.Run.org_id == self.row.id)
            )
        return Run(row=row, loaders=self.loaders) if row else None

    @strawberry.field(description="Every run of the organization that has not finished, oldest first.")
    async def active_runs(self) -> list[Run]:
        return runs_with_positions(await self.loaders.active_runs.load(self.row.id), self.loaders)

    @strawberry.field
    def settings(self) -> Settings:
        return Settings(scope=self.row, loaders=self.loaders)

    @strawberry.field
    async def variables(self) -> list[Variable]:
        return await _variables(self.loaders, self.row)


@strawberry.type
class Folder:
    row: Private[models.Folder]
    loaders: Private[Loaders]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(self.row.id)

    @strawberry.field(description='The full path, such as "prod/eu".')
    def path(self) -> str:
        return self.row.path

    @strawberry.field(description="The last segment of the path.")
    def name(self) -> str:
        return self.row.name

    @strawberry.field
    def created_at(self) -> datetime:
        return self.row.created_at

    @strawberry.field
    async def parent(self) -> Folder | None:
        if self.row.parent_id is None:
            return None
        row = await self.loaders.folder.load(self.row.parent_id)
        return Folder(row=row, loaders=self.loaders) if row else None

    @strawberry.field
    async def children(self) -> list[Folder]:
        return [Folder(row=f, loaders=self.loaders) for f in await self.loaders.subfolders.load(self.row.id)]

    @strawberry.field
    async def stacks(self) -> list[Stack]:
        return [
            Stack(row=s, loaders=self.loaders) for s in await self.loaders.folder_stacks.load(self.row.id)
        ]

    @strawberry.field
    def settings(self) -> Settings:
        return Settings(scope=self.row, loaders=self.loaders)

    @strawberry.field
    async def variables(self) -> list[Variable]:
        return await _variables(self.loaders, self.row)


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None = strawberry.field(description="Pass as `after` for the next page.")


@strawberry.type
class RunConnection:
    stack_id: Private[str]
    loaders: Private[Loaders]
    nodes: list[Run]
    page_info: PageInfo

    @strawberry.field(description="How many runs the stack has in all.")
    async def total_count(self) -> int:
        return await self.loaders.stack_run_count.load(self.stack_id)


@strawberry.type
class Stack:
    row: Private[models.Stack]
    loaders: Private[Loaders]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(self.row.id)

    @strawberry.field
    def slug(self) -> str:
        return self.row.slug

    @strawberry.field
    def name(self) -> str:
        return self.row.name

    @strawberry.field
    def repository(self) -> str:
        return self.row.repository

    @strawberry.field
    def branch(self) -> str:
        return self.row.branch

    @strawberry.field(description="The directory of the stack's code in the repository.")
    def path(self) -> str:
        return self.row.path

    @strawberry.field
    def git_auth(self) -> GitAuth | None:
        if self.row.git_https_token_sealed:
            return GitAuth.HTTPS_TOKEN
        return GitAuth.SSH_KEY if self.row.git_ssh_key_sealed else None

    @strawberry.field
    def created_at(self) -> datetime:
        return self.row.created_at

    @strawberry.field
    async def folder(self) -> Folder | None:
        if self.row.folder_id is None:
            return None
        row = await self.loaders.folder.load(self.row.folder_id)
        return Folder(row=row, loaders=self.loaders) if row else None

    @strawberry.field(description=f"Newest first; `first` is at most {MAX_PAGE_SIZE}.")
    async def runs(self, first: int = DEFAULT_PAGE_SIZE, after: str | None = None) -> RunConnection:
        if not 1 <= first <= MAX_PAGE_SIZE:
            raise InvalidRequest(
                f"'first' must be between 1 and {MAX_PAGE_SIZE}; got {first}.", field="first"
            )
        before = None
        if after is not None:
            if not CURSOR.fullmatch(after):
                raise InvalidRequest(
                    f"'after' must be a cursor from pageInfo.endCursor; got {after!r}.", field="after"
                )
            before = int(after)
        rows = await self.loaders.stack_runs.load(RunPageKey(self.row.id, first + 1, before))
        page = rows[:first]
        return RunConnection(
            stack_id=self.row.id,
            loaders=self.loaders,
            nodes=[Run(row=r, loaders=self.loaders) for r in page],
            page_info=PageInfo(
                has_next_page=len(rows) > first, end_cursor=str(page[-1].number) if page else None
            ),
        )

    @strawberry.field
    def settings(self) -> Settings:
        return Settings(scope=self.row, loaders=self.loaders)

    @strawberry.field
    async def variables(self) -> list[Variable]:
        return await _variables(self.loaders, self.row)


# Runs -----------------------------------------------------------------------------------------


@strawberry.type
class Commit:
    sha: str
    author: str | None
    message: str | None = strawberry.field(description="The first line of the commit message.")
    url: str | None = strawberry.field(
        description="A browsable link for hosted Git; null for a local repository."
    )


@strawberry.type
class Step:
    name: str
    status: StepStatus
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None

    @classmethod
    def of(cls, row: models.RunStep) -> Step:
        return cls(
            name=row.name,
            status=StepStatus(row.status),
            started_at=row.started_at,
            finished_at=row.finished_at,
            duration_ms=duration_ms(row.started_at, row.finished_at),
        )


@strawberry.type
class ChangeSummary:
    delete: int
    replace: int
    update: int
    create: int
    text: str = strawberry.field(description='"1 delete · 1 replace · 2 update · 2 create", or "no changes".')

    @classmethod
    def of(cls, run: models.Run) -> ChangeSummary:
        summary = run_summary(run)
        return cls(
            delete=summary.delete,
            replace=summary.replace,
            update=summary.update,
            create=summary.create,
            text=summary.text,
        )


@strawberry.type
class Approval:
    row: Private[models.Run]
    loaders: Private[Loaders]

    @strawberry.field(description="Whether approval was required, read when the plan finished.")
    def required(self) -> bool | None:
        return self.row.approval_required

    @strawberry.field
    def confirm_destructive(self) -> bool | None:
        return self.row.confirm_destructive

    @strawberry.field
    async def approved_by(self) -> str | None:
        return await self.loaders.email.load(self.row.approved_by_id) if self.row.approved_by_id else None

    @strawberry.field
    def approved_at(self) -> datetime | None:
        return self.row.approved_at

    @strawberry.field(description="The deleted or replaced addresses confirmed with the approval.")
    def acknowledged(self) -> list[str]:
        return list(self.row.acknowledged or [])


@strawberry.type(description="A variable the plan used: its name and origin, never its value.")
class VariableUsage:
    name: str
    origin: str
    sensitive: bool
    kind: VariableKind


@strawberry.type
class RunConfiguration:
    config_yaml: str | None = strawberry.field(description="The config.yaml of the commit.")
    engine: str | None
    settings: EffectiveSettings | None = strawberry.field(
        description="The rules read when the plan finished, with their origins; null before."
    )
    variables: list[VariableUsage]

    @classmethod
    def of(cls, run: models.Run) -> RunConfiguration:
        settings = None
        if run.approval_required is not None:
            settings = EffectiveSettings(
                require_approval=ResolvedSetting(
                    value=bool(run.approval_required), origin=run.approval_required_origin or ""
                ),
                confirm_destructive=ResolvedSetting(
                    value=bool(run.confirm_destructive), origin=run.confirm_destructive_origin or ""
                ),
            )
        return cls(
            config_yaml=run.config_yaml,
            engine=run.engine,
            settings=settings,
            variables=[
                VariableUsage(
                    name=v["name"],
                    origin=v["origin"],
                    sensitive=bool(v["sensitive"]),
                    kind=VariableKind(v.get("kind", "terraform")),
                )
                for v in run.variables_used or []
            ],
        )


@strawberry.type
class StateBackend:
    unit: str
    backend: str


@strawberry.type(description="The resources whose apply failed; each one's error is on the resource.")
class FailedResources:
    count: int
    addresses: list[str] = strawberry.field(description="The first 100 addresses, in plan order.")


@strawberry.type(description="A piece of the run's log and the run-level offset just after it.")
class LogChunk:
    text: str
    next_offset: int = strawberry.field(description="Pass as `fromOffset` to continue after this text.")


@strawberry.type
class AttributeChange:
    name: str
    before: JSON | None = strawberry.field(description='"(sensitive)" for sensitive values.')
    after: JSON | None = strawberry.field(description='"(sensitive)", or "(known after apply)".')
    forces_replacement: bool


@strawberry.type
class ReplaceStage:
    action: ChangeAction
    state: ResourceState | None


@strawberry.type
class ResourceChange:
    row: Private[models.ResourceChange]

    @strawberry.field
    def address(self) -> str:
        return self.row.address

    @strawberry.field
    def type(self) -> str:
        return self.row.type

    @strawberry.field(description='"." for a single root; the unit\'s path with Terragrunt run --all.')
    def unit(self) -> str:
        return self.row.unit

    @strawberry.field
    def action(self) -> ChangeAction:
        return ChangeAction(self.row.action)

    @strawberry.field(description="Only the attributes that change.")
    def attributes(self) -> list[AttributeChange]:
        return [
            AttributeChange(
                name=a["name"],
                before=a["before"],
                after=a["after"],
                forces_replacement=bool(a["forces_replacement"]),
            )
            for a in self.row.attributes or []
        ]

    @strawberry.field(description="What forces a replacement (replacements only).")
    def replaced_because(self) -> list[str]:
        return list(self.row.replaced_because or []) if self.row.action == "replace" else []

    @strawberry.field
    def state(self) -> ResourceState | None:
        return _optional_enum(ResourceState, self.row.state)

    @strawberry.field(description="Terraform's error on this resource, when it failed.")
    def error(self) -> str | None:
        return self.row.error

    @strawberry.field(description="A replacement's two stages, in the order they ran.")
    def stages(self) -> list[ReplaceStage]:
        if self.row.action != "replace":
            return []
        return [
            ReplaceStage(
                action=ChangeAction(s["action"]), state=_optional_enum(ResourceState, s.get("state"))
            )
            for s in self.row.stages or []
        ]


@strawberry.type
class ChangeGroup:
    action: ChangeAction
    title: str = strawberry.field(description='"Will be deleted", "Will be replaced", …')
    count: int
    changes: list[ResourceChange]


@strawberry.type
class Changes:
    summary: ChangeSummary
    groups: list[ChangeGroup] = strawberry.field(
        description="Always four, in order: delete, replace, update, create."
    )

    @classmethod
    def of(cls, run: models.Run, rows: Iterable[models.ResourceChange]) -> Changes:
        grouped: dict[str, list[ResourceChange]] = {action: [] for action, _ in GROUPS}
        for row in rows:
            grouped[row.action].append(ResourceChange(row=row))
        return cls(
            summary=ChangeSummary.of(run),
            groups=[
                ChangeGroup(
                    action=ChangeAction(action),
                    title=title,
                    count=len(grouped[action]),
                    changes=grouped[action],
                )
                for action, title in GROUPS
            ],
        )


@strawberry.type
class Run:
    row: Private[models.Run]
    loaders: Private[Loaders]
    # Queue positions worked out for a whole list at once (the active runs), else loaded.
    known_positions: Private[dict[str, int] | None] = None

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(self.row.id)

    @strawberry.field(description="The run's number in its stack, in order of arrival.")
    def number(self) -> int:
        return self.row.number

    @strawberry.field
    def type(self) -> RunType:
        return RunType(self.row.type)

    @strawberry.field
    def status(self) -> RunStatus:
        return RunStatus(self.row.status)

    @strawberry.field(description="True while the run waits for someone's approval.")
    def awaiting_approval(self) -> bool:
        return self.row.status == RunStatus.AWAITING_APPROVAL

    @strawberry.field
    def finished(self) -> bool:
        return RunStatus(self.row.status) in FINISHED

    @strawberry.field
    async def stack(self) -> Stack:
        row = await self.loaders.stack.load(self.row.stack_id)
        assert row is not None
        return Stack(row=row, loaders=self.loaders)

    @strawberry.field
    def created_at(self) -> datetime:
        return self.row.created_at

    @strawberry.field
    async def created_by(self) -> str | None:
        return await self.loaders.email.load(self.row.created_by_id) if self.row.created_by_id else None

    @strawberry.field
    def updated_at(self) -> datetime:
        return self.row.updated_at

    @strawberry.field
    def finished_at(self) -> datetime | None:
        return self.row.finished_at

    @strawberry.field(description="1 = starts next on its stack; null unless queued.")
    async def queue_position(self) -> int | None:
        if self.known_positions is not None:
            return self.known_positions.get(self.row.id)
        return await self.loaders.queue_position.load(self.row)

    @strawberry.field
    def commit(self) -> Commit | None:
        run = self.row
        if not run.commit_sha:
            return None
        return Commit(
            sha=run.commit_sha, author=run.commit_author, message=run.commit_message, url=run.commit_url
        )

    @strawberry.field(description="checkout, init, plan, approval, apply, … as far as the run has come.")
    async def steps(self) -> list[Step]:
        return [Step.of(s) for s in await self.loaders.steps.load(self.row.id)]

    @strawberry.field(description="Null until the plan is stored.")
    def summary(self) -> ChangeSummary | None:
        return ChangeSummary.of(self.row) if self.row.has_plan else None

    @strawberry.field
    def approval(self) -> Approval:
        return Approval(row=self.row, loaders=self.loaders)

    @strawberry.field
    def configuration(self) -> RunConfiguration:
        return RunConfiguration.of(self.row)

    @strawberry.field
    def state_backends(self) -> list[StateBackend]:
        return [StateBackend(unit=b["unit"], backend=b["backend"]) for b in self.row.state_backends or []]

    @strawberry.field(description="The run's error when it failed for a reason that belongs to no resource.")
    def error(self) -> str | None:
        return self.row.error

    @strawberry.field(description="The apply's failed resources; none means count 0.")
    def failed_resources(self) -> FailedResources:
        return FailedResources(
            count=self.row.failed_resource_count, addresses=list(self.row.failed_resource_addresses or [])
        )

    @strawberry.field(description="The planned changes, grouped and counted.")
    async def changes(self) -> Changes:
        return Changes.of(self.row, await self.loaders.changes.load(self.row.id))

    @strawberry.field(description="The log's length in characters so far.")
    def log_length(self) -> int:
        return self.row.log_length

    @strawberry.field(description="The log (or one step's) from a run-level character offset.")
    async def log(self, step: str | None = None, from_offset: int = 0) -> LogChunk:
        if from_offset < 0:
            raise InvalidRequest("'fromOffset' must not be negative.", field="fromOffset")
        async with self.loaders.ctx.db.transaction() as session:
            part = await read_log(session, self.row.id, from_offset, step)
        return LogChunk(text=part.text, next_offset=part.next_offset)


def queue_positions_in(rows: Iterable[models.Run]) -> dict[str, int]:
    """Queue positions from a list that holds every queued run of its stacks (an organization's
    active runs): the same numbers as runs.queue_positions, without a query."""
    positions: dict[str, int] = {}
    counters: dict[str, int] = {}
    for row in sorted(
        (r for r in rows if r.status == RunStatus.QUEUED), key=lambda r: (r.stack_id, r.number)
    ):
        counters[row.stack_id] = counters.get(row.stack_id, 0) + 1
        positions[row.id] = counters[row.stack_id]
    return positions


def runs_with_positions(rows: list[models.Run], loaders: Loaders) -> list[Run]:
    positions = queue_positions_in(rows)
    return [Run(row=r, loaders=loaders, known_positions=positions) for r in rows]
