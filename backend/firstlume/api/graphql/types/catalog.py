"""The caller, organizations, folders and stacks: the tree above the runs."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable
from datetime import datetime, timedelta
from typing import Any

import strawberry
from strawberry import Private
from strawberry.types import Info

from firstlume.api.graphql.access import Member, Token, callers_grants, members_of, role_of, tokens_of
from firstlume.api.graphql.enums import GitAuth, PullRequestMode, StackTrigger
from firstlume.api.graphql.loaders import Loaders, known_or_awaited
from firstlume.api.graphql.pacing import paced
from firstlume.api.graphql.selections import selects
from firstlume.api.graphql.sso import FolderGrants, SsoMapping, grants_of, sso_of
from firstlume.api.graphql.types import drift as drift_types
from firstlume.api.graphql.types.audit import AuditConnection, audit_of
from firstlume.api.graphql.types.dependencies import (
    DependencyGraph,
    StackDependencies,
    dependencies_of,
    graph_of,
)
from firstlume.api.graphql.types.drift import DriftCheck, NotificationDestination, StackDrift
from firstlume.api.graphql.types.git import GitDelivery
from firstlume.api.graphql.types.pagination import PageInfo, check_first
from firstlume.api.graphql.types.plain import filled
from firstlume.api.graphql.types.policies import Policy
from firstlume.api.graphql.types.pull_requests import GitHost, PullRequest
from firstlume.api.graphql.types.runs import Run
from firstlume.api.graphql.types.settings import Settings, Variable, variables_of
from firstlume.api.graphql.types.state import StackState, state_of, states_of
from firstlume.api.graphql.types.summaries import StackSummary, summary_of
from firstlume.api.graphql.types.viewer_can import ViewerPermissions, viewer_can
from firstlume.domain.errors import InvalidRequest
from firstlume.domain.runs import RunStatus, RunType, TriggerKind
from firstlume.domain.state import normalize_unit
from firstlume.services import accounts
from firstlume.services.access import folder_grants
from firstlume.services.context import Actor
from firstlume.services.dependencies import config as dependency_config
from firstlume.services.git import hosts
from firstlume.services.policies import store as policy_store
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads import git as git_reads
from firstlume.services.reads import pull_requests as pull_request_reads
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads.catalog import DeletedStackRecord, FolderRecord, OrganizationRecord, StackRecord
from firstlume.services.reads.runs import RunFilter, RunPageKey, RunRecord

MAX_PAGE_SIZE = 100
DEFAULT_PAGE_SIZE = 20
RUN_CURSOR = re.compile(r"[0-9]{1,9}")
# The fields of a run that its steps answer.
STEP_FIELDS = frozenset({"steps", "startedAt", "durationMs"})


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
        async with self.loaders.reads.session() as session:
            orgs = await accounts.orgs_of(session, self.actor)
        return [Organization(row=o, loaders=self.loaders) for o in orgs]

    @strawberry.field(
        description="The caller's API tokens (not revoked), newest first; never the tokens themselves."
    )
    async def tokens(self) -> list[Token]:
        return await tokens_of(self.loaders.reads, self.actor)


@strawberry.type(
    description="A deleted stack, kept with its runs and state versions until `purgeAfter` (admins read it)."
)
class DeletedStack:
    id: strawberry.ID
    slug: str
    name: str
    deleted_at: datetime
    deleted_by: str | None
    purge_after: datetime

    @classmethod
    def of(cls, record: DeletedStackRecord, retention_days: float) -> DeletedStack:
        return cls(
            id=strawberry.ID(record.id),
            slug=record.deleted_slug or "",
            name=record.name,
            deleted_at=record.deleted_at,
            deleted_by=record.deleted_by,
            purge_after=record.deleted_at + timedelta(days=retention_days),
        )


@strawberry.type
class Organization:
    row: Private[OrganizationRecord]
    loaders: Private[Loaders]

    id: strawberry.ID = filled()
    slug: str = filled()
    name: str = filled()

    def __post_init__(self) -> None:
        self.id, self.slug, self.name = strawberry.ID(self.row.id), self.row.slug, self.row.name

    @property
    def permission_org_id(self) -> str:
        """Whose role a guarded field of this type checks (api/graphql/permissions.py)."""
        return str(self.row.id)

    @strawberry.field(description="Members with their roles and groups, by email.")
    async def members(self) -> list[Member]:
        return await members_of(self.loaders.reads, self.row.id)

    @strawberry.field(description="The caller's role here: reader, operator or admin.")
    async def viewer_role(self, info: strawberry.Info) -> str | None:
        return await role_of(self.loaders.reads, self.row.id, info.context.require_actor())

    @strawberry.field(
        description="What the caller may do in the organization (its organization role; folder grants "
        "raise it on a folder's or stack's own viewerCan)."
    )
    async def viewer_can(self, info: strawberry.Info) -> ViewerPermissions:
        return await viewer_can(self.loaders, self.row.id, None, info)

    @strawberry.field(
        description="The mapping of the identity provider's groups, applied at each sign-in (admins)."
    )
    async def sso(self) -> SsoMapping:
        return await sso_of(self.loaders.reads, self.row)

    @strawberry.field(
        description="A folder's grants, and every grant that reaches it with its origin (admins)."
    )
    async def folder_grants(self, path: str) -> FolderGrants:
        return await grants_of(self.loaders.reads, self.row, path)

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
        async with self.loaders.reads.session() as session:
            row = await catalog_reads.folder_by_path(session, self.row.id, path)
        if row is None:
            return None
        self.loaders.seen([row])
        return Folder(row=row, loaders=self.loaders)

    @strawberry.field(
        description="The newest webhook deliveries and polls that found a new head, newest first "
        f"(at most {git_reads.MAX_DELIVERIES})."
    )
    async def git_deliveries(self, first: int = git_reads.MAX_DELIVERIES) -> list[GitDelivery]:
        check_first(first, git_reads.MAX_DELIVERIES)
        async with self.loaders.reads.session() as session:
            rows = await git_reads.deliveries(session, self.row.id, first)
        return [GitDelivery.of(row) for row in rows]

    @strawberry.field(
        description="The pull requests seen, newest first (at most 100), each with its proposed runs; "
        "`state` open or closed (closed or merged), `stack` those with a run of that stack. As GET "
        "$O/pull-requests."
    )
    async def pull_requests(self, state: str | None = None, stack: str | None = None) -> list[PullRequest]:
        if state is not None and state not in ("open", "closed"):
            raise InvalidRequest("'state' must be open or closed.", field="state")
        async with self.loaders.reads.session() as session:
            rows = await pull_request_reads.pull_requests(session, self.row.id, state=state, stack_slug=stack)
        return [PullRequest.of(row) for row in rows]

    @strawberry.field(description="The Git hosts that receive statuses and comments (never their tokens).")
    async def git_hosts(self) -> list[GitHost]:
        async with self.loaders.reads.session() as session:
            rows = await hosts.list_hosts(session, self.row.id)
        return [GitHost.of(row) for row in rows]

    @strawberry.field(
        description="When the webhook secret was last set; null without one. The secret is write-only."
    )
    async def webhook_secret_set_at(self) -> datetime | None:
        async with self.loaders.reads.session() as session:
            return await git_reads.secret_rotated_at(session, self.row.id)

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
        key = (self.row.id, slug)
        if key in self.loaders.stacks_by_slug:  # read with the organization
            row = self.loaders.stacks_by_slug[key]
        else:
            async with self.loaders.reads.session() as session:
                row = await catalog_reads.stack_by_slug(session, self.row.id, slug)
        if row is None:
            return None
        self.loaders.seen([row])
        return Stack(row=row, loaders=self.loaders)

    @strawberry.field
    async def run(self, id: strawberry.ID) -> Run | None:
        async with self.loaders.reads.session() as session:
            row = await run_reads.run_in_org(session, self.row.id, str(id))
        return Run(row=row, loaders=self.loaders) if row else None

    @strawberry.field(
        description="The audit trail: changes made through any API or the CLI, newest first. Each "
        "filter keeps the entries matching any of its values; `since` (inclusive) and `until` (exclusive) "
        "are RFC 3339 times; `first` is at most 500."
    )
    async def audit(
        self,
        first: int = 50,
        after: str | None = None,
        actor: list[str] | None = None,
        action: list[str] | None = None,
        target: list[str] | None = None,
        stack: list[str] | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> AuditConnection:
        return await audit_of(
            self.loaders,
            self.row.id,
            first=first,
            after=after,
            actor=actor,
            action=action,
            target=target,
            stack=stack,
            since=since,
            until=until,
        )

    @strawberry.field(description="Every run of the organization that has not finished, oldest first.")
    async def active_runs(self) -> list[Run]:
        return [Run(row=r, loaders=self.loaders) for r in await self.loaders.active_runs.load(self.row.id)]

    @strawberry.field
    def settings(self) -> Settings:
        return Settings(scope=self.row, loaders=self.loaders)

    @strawberry.field
    async def variables(self) -> list[Variable]:
        return await variables_of(self.loaders, self.row)

    @strawberry.field(description="The drift overview: one line per stack, by slug.")
    async def drift(self) -> list[StackDrift]:
        return await drift_types.overview(self.loaders, self.row.id)

    @strawberry.field(
        description="Every stack with its last run's status, and which stacks read which outputs."
    )
    async def dependency_graph(self) -> DependencyGraph:
        async with self.loaders.reads.session() as session:
            return graph_of(await dependency_config.dependency_graph(session, self.row.id))

    @strawberry.field(description="Notification destinations, oldest first.")
    async def notifications(self) -> list[NotificationDestination]:
        return await drift_types.destinations(self.loaders, self.row.id)

    @strawberry.field(description="The organization's policies, by name.")
    async def policies(self) -> list[Policy]:
        async with self.loaders.reads.session() as session:
            return [Policy.of(p) for p in await policy_store.list_policies(session, self.row.id)]

    @strawberry.field(description="Deleted stacks not purged yet, most recently deleted first (admins).")
    async def deleted_stacks(self) -> list[DeletedStack]:
        retention = self.loaders.ctx.settings.deleted_stack_retention_days
        async with self.loaders.reads.session() as session:
            found = await catalog_reads.deleted_stacks(session, self.row.id)
        return [DeletedStack.of(d, retention) for d in found]


@strawberry.type
class Folder:
    row: Private[FolderRecord]
    loaders: Private[Loaders]

    id: strawberry.ID = filled()
    path: str = filled('The full path, such as "prod/eu".')
    name: str = filled("The last segment of the path.")
    created_at: datetime = filled()

    def __post_init__(self) -> None:
        row = self.row
        self.id, self.path, self.name, self.created_at = (
            strawberry.ID(row.id),
            row.path,
            row.name,
            row.created_at,
        )

    @strawberry.field(description="What the caller may do on this folder and the stacks directly in it.")
    async def viewer_can(self, info: strawberry.Info) -> ViewerPermissions:
        return await viewer_can(self.loaders, self.row.org_id, self.row.path, info)

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
        return await variables_of(self.loaders, self.row)


@strawberry.type
class RunConnection:
    stack_id: Private[str]
    filter: Private[RunFilter]
    loaders: Private[Loaders]
    rows: Private[list[RunRecord]]
    page_info: PageInfo

    @strawberry.field(graphql_type=list[Run])
    def nodes(self) -> AsyncIterator[Run]:
        # Up to 100 runs, and a query may ask for 100 such pages: completed item by item, sharing
        # the event loop (pacing.py).
        return paced(Run(row=row, loaders=self.loaders) for row in self.rows)

    @strawberry.field(description="How many of the stack's runs match the filters.", graphql_type=int)
    def total_count(self) -> int | Awaitable[int]:
        # Counted by the page's own statement when the query asked for it (Stack.runs).
        return known_or_awaited(self.loaders.stack_run_count, (self.stack_id, self.filter))


@strawberry.type
class Stack:
    row: Private[StackRecord]
    loaders: Private[Loaders]

    id: strawberry.ID = filled()
    slug: str = filled()
    name: str = filled()
    repository: str = filled()
    branch: str = filled()
    path: str = filled("The directory of the stack's code in the repository.")
    git_auth: GitAuth | None = filled()
    trigger: StackTrigger = filled(
        "What a new commit on the branch that touches the stack (its path or config.yaml's watch globs) starts."
    )
    pull_requests: PullRequestMode = filled(
        "What a pull request against the branch that touches the stack starts: nothing, or a proposed plan."
    )
    created_at: datetime = filled()

    def __post_init__(self) -> None:
        row = self.row
        self.trigger = StackTrigger(row.trigger)
        self.pull_requests = PullRequestMode(row.pull_requests)
        self.id, self.slug, self.name = strawberry.ID(row.id), row.slug, row.name
        self.repository, self.branch, self.path = row.repository, row.branch, row.path
        self.git_auth = GitAuth(row.git_auth) if row.git_auth else None
        self.created_at = row.created_at

    @strawberry.field(
        description="The caller's effective role on this stack: their organization role, raised (never "
        "lowered) by the grants of the stack's folder and the folders above it. The UI disables what it "
        "does not allow."
    )
    async def viewer_role(self, info: strawberry.Info) -> str | None:
        actor = info.context.require_actor()
        org_id = self.row.org_id
        caller = self.loaders.viewer_grants.get(org_id)
        if caller is None:
            caller = self.loaders.viewer_grants[org_id] = asyncio.ensure_future(
                callers_grants(self.loaders.reads, org_id, actor)
            )
        folder = await self.loaders.folder.load(self.row.folder_id) if self.row.folder_id else None
        return folder_grants.role_on(await caller, folder.path if folder else None)

    @strawberry.field(description="What the caller may do on this stack (folder grants included).")
    async def viewer_can(self, info: strawberry.Info) -> ViewerPermissions:
        folder = await self.loaders.folder.load(self.row.folder_id) if self.row.folder_id else None
        return await viewer_can(self.loaders, self.row.org_id, folder.path if folder else None, info)

    @strawberry.field
    async def folder(self) -> Folder | None:
        if self.row.folder_id is None:
            return None
        row = await self.loaders.folder.load(self.row.folder_id)
        return Folder(row=row, loaders=self.loaders) if row else None

    @strawberry.field(
        description=f"Newest first; `first` is at most {MAX_PAGE_SIZE}. `status`, `type` and `trigger` "
        "keep only the runs in one of those statuses, of one of those types, started by one of those."
    )
    async def runs(
        self,
        info: Info[Any, None],
        first: int = DEFAULT_PAGE_SIZE,
        after: str | None = None,
        status: list[RunStatus] | None = None,
        type: list[RunType] | None = None,
        trigger: list[TriggerKind] | None = None,
    ) -> RunConnection:
        check_first(first, MAX_PAGE_SIZE)
        before = None
        if after is not None:
            if not RUN_CURSOR.fullmatch(after):
                raise InvalidRequest(
                    f"'after' must be a cursor from pageInfo.endCursor; got {after!r}.", field="after"
                )
            before = int(after)
        run_filter = RunFilter(
            statuses=tuple(RunStatus(s) for s in status or ()),
            types=tuple(RunType(t) for t in type or ()),
            triggers=tuple(TriggerKind(t) for t in trigger or ()),
        )
        selected = info.selected_fields
        counted = selects(selected, "totalCount")
        key = RunPageKey(self.row.id, first + 1, before, run_filter, counted=counted)
        rows = await self.loaders.stack_runs.load(key)
        page = rows[:first]
        # Known before the runs resolve, so that their `stack`, `createdBy`, `approval.approvedBy`
        # and steps answer at once (one read for the page instead of a task per run and field).
        self.loaders.seen([self.row])
        people = {r.created_by_id for r in page if r.created_by_id}
        if selects(selected, "nodes", "approval", "approvedBy"):
            people.update(r.approved_by_id for r in page if r.approved_by_id)
        await self.loaders.email.load_many(people)
        if selects(selected, "nodes", STEP_FIELDS):
            await self.loaders.steps_of_page(key, page)
        return RunConnection(
            stack_id=self.row.id,
            filter=run_filter,
            loaders=self.loaders,
            rows=page,
            page_info=PageInfo(
                has_next_page=len(rows) > first, end_cursor=str(page[-1].number) if page else None
            ),
        )

    @strawberry.field(
        description="Where the stack stands: its last apply, what awaits people, its drift (the stacks list)."
    )
    async def summary(self) -> StackSummary:
        return await summary_of(self.loaders, self.row.id)

    @strawberry.field
    def settings(self) -> Settings:
        return Settings(scope=self.row, loaders=self.loaders)

    @strawberry.field
    async def variables(self) -> list[Variable]:
        return await variables_of(self.loaders, self.row)

    @strawberry.field(
        description='Managed state of the root module (unit ".") or of a Terragrunt unit by path.'
    )
    async def state(self, unit: str = ".") -> StackState:
        return await state_of(self.loaders, self.row, normalize_unit(unit))

    @strawberry.field(description="Every unit of the stack with managed state (or a lock), by path.")
    async def states(self) -> list[StackState]:
        return await states_of(self.loaders, self.row)

    @strawberry.field(
        description=f"The stack's drift runs, newest first, with what drifted; `first` is at most {MAX_PAGE_SIZE}."
    )
    async def drift_history(self, first: int = DEFAULT_PAGE_SIZE) -> list[DriftCheck]:
        check_first(first, MAX_PAGE_SIZE)
        return await drift_types.history(self.loaders, self.row.id, first)

    @strawberry.field(description="The stacks this stack reads outputs of, and those that read its outputs.")
    async def dependencies(self) -> StackDependencies:
        async with self.loaders.reads.session() as session:
            found = await dependency_config.stack_dependencies(session, self.row.org_id, self.row.slug)
        return dependencies_of(found)
