"""The write side. Each mutation opens one unit of work, calls one use case, and returns its
success type or a typed error (see errors.py); the REST routes do the same things."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info

from firstlume.api.graphql.access import AccessMutation
from firstlume.api.graphql.context import GraphQLContext
from firstlume.api.graphql.errors import (
    AcknowledgementRequiredError,
    AlreadyExistsError,
    ConflictError,
    InvalidInputError,
    InvalidStatusError,
    NotFoundError,
    typed,
)
from firstlume.api.graphql.loaders import Loaders
from firstlume.api.graphql.sso import SsoMutation
from firstlume.api.graphql.types import Folder, Run, Settings, Stack, Variable, VariableKind
from firstlume.api.graphql.types.drift import (
    NotificationDelivery,
    NotificationDestination,
    delivery_of,
    destination_of,
)
from firstlume.api.graphql.types.state import StackState, state_of
from firstlume.api.validation import command
from firstlume.domain.errors import InvalidRequest
from firstlume.domain.git import ForkPolicy, PullRequestMode, StackTrigger
from firstlume.domain.runs import RunType
from firstlume.domain.state import normalize_unit
from firstlume.services import accounts, catalog, inherited, runs
from firstlume.services.commands import (
    ApproveRun,
    CancelRun,
    CreateFolder,
    CreateNotification,
    CreateStack,
    DiscardRun,
    PatchNotification,
    PatchSettings,
    PutVariable,
    StartRun,
)
from firstlume.services.context import Actor, Unit
from firstlume.services.git.polling import set_baseline
from firstlume.services.notifications import destinations
from firstlume.services.notifications.sender import send_test_delivery
from firstlume.services.reads import notifications as notification_reads
from firstlume.services.reads.catalog import OrganizationRecord
from firstlume.services.reads.settings import Scope
from firstlume.services.state import locks
from firstlume.services.state.callers import StateCaller

Ctx = Info[GraphQLContext, None]

StartRunResult = Annotated[Run | NotFoundError | InvalidInputError, strawberry.union("StartRunResult")]
ApproveRunResult = Annotated[
    Run
    | NotFoundError
    | InvalidStatusError
    | AcknowledgementRequiredError
    | ConflictError
    | InvalidInputError,
    strawberry.union("ApproveRunResult"),
]
DiscardRunResult = Annotated[
    Run | NotFoundError | InvalidStatusError | ConflictError | InvalidInputError,
    strawberry.union("DiscardRunResult"),
]
CancelRunResult = Annotated[
    Run | NotFoundError | InvalidStatusError | ConflictError, strawberry.union("CancelRunResult")
]
CreateFolderResult = Annotated[
    Folder | NotFoundError | InvalidInputError, strawberry.union("CreateFolderResult")
]
CreateStackResult = Annotated[
    Stack | NotFoundError | InvalidInputError | AlreadyExistsError, strawberry.union("CreateStackResult")
]
UpdateSettingsResult = Annotated[
    Settings | NotFoundError | InvalidInputError, strawberry.union("UpdateSettingsResult")
]
SetVariableResult = Annotated[
    Variable | NotFoundError | InvalidInputError, strawberry.union("SetVariableResult")
]


@strawberry.type
class DeletedVariable:
    name: str


ForceUnlockResult = Annotated[
    StackState | NotFoundError | InvalidInputError, strawberry.union("ForceUnlockResult")
]
DeleteVariableResult = Annotated[
    DeletedVariable | NotFoundError | InvalidInputError, strawberry.union("DeleteVariableResult")
]

NotificationResult = Annotated[
    NotificationDestination | NotFoundError | InvalidInputError, strawberry.union("NotificationResult")
]
NotificationDeliveryResult = Annotated[
    NotificationDelivery | NotFoundError | InvalidInputError, strawberry.union("NotificationDeliveryResult")
]


@strawberry.type
class DeletedNotification:
    id: strawberry.ID


DeleteNotificationResult = Annotated[
    DeletedNotification | NotFoundError | InvalidInputError, strawberry.union("DeleteNotificationResult")
]


@strawberry.input(description="A notification destination; `folder` or `stack` narrows it to that scope.")
class NotificationInput:
    name: str
    url: str
    events: list[str] = strawberry.field(description="run.awaiting_approval, run.applied, run.failed, …")
    format: str = strawberry.field(default="json", description="json or slack.")
    folder: str | None = None
    stack: str | None = None
    secret: str | None = strawberry.field(default=None, description="Write-only: signs each JSON body.")


@strawberry.input(description="Only the fields given change; `secret: null` removes the secret.")
class NotificationPatchInput:
    name: str | None = strawberry.UNSET
    url: str | None = strawberry.UNSET
    events: list[str] | None = strawberry.UNSET
    format: str | None = strawberry.UNSET
    secret: str | None = strawberry.UNSET


# The error types of each union above, for `typed`.
INPUT_ERRORS = (NotFoundError, InvalidInputError)
APPROVE_ERRORS = (
    NotFoundError,
    InvalidStatusError,
    AcknowledgementRequiredError,
    ConflictError,
    InvalidInputError,
)
DISCARD_ERRORS = (NotFoundError, InvalidStatusError, ConflictError, InvalidInputError)
CANCEL_ERRORS = (NotFoundError, InvalidStatusError, ConflictError)
STACK_ERRORS = (NotFoundError, InvalidInputError, AlreadyExistsError)


@strawberry.input
class CreateStackInput:
    slug: str
    repository: str = strawberry.field(description="Any URL git understands, including file:///…")
    name: str | None = None
    folder: str | None = strawberry.field(
        default=None, description='A folder path such as "prod/eu"; created if missing.'
    )
    branch: str | None = None
    path: str | None = None
    git_https_token: str | None = strawberry.field(default=None, description="Write-only.")
    git_ssh_key: str | None = strawberry.field(default=None, description="Write-only.")
    trigger: StackTrigger | None = strawberry.field(
        default=None, description="What a new commit on the branch starts; manual (nothing) by default."
    )
    pull_requests: PullRequestMode | None = strawberry.field(
        default=None, description="What a pull request against the branch starts; off (nothing) by default."
    )


@strawberry.input(
    description="Only the settings given change; null removes the level's value, so it inherits again."
)
class SettingsInput:
    require_approval: bool | None = strawberry.UNSET
    confirm_destructive: bool | None = strawberry.UNSET
    drift_schedule: str | None = strawberry.field(
        default=strawberry.UNSET, description='A cron schedule of five fields (UTC), such as "0 6 * * *".'
    )
    approvers: list[str] | None = strawberry.field(
        default=strawberry.UNSET, description='"user:<email>" and "group:<name>" entries.'
    )
    forbid_self_approval: bool | None = strawberry.UNSET
    policies: list[str] | None = strawberry.field(
        default=strawberry.UNSET,
        description="Names of the organization's policies evaluated at the end of each plan.",
    )
    pull_requests_from_forks: ForkPolicy | None = strawberry.field(
        default=strawberry.UNSET,
        description="What a pull request from a fork runs: OFF (nothing), PLAN_WITHOUT_SECRETS, PLAN.",
    )


@asynccontextmanager
async def org_unit(info: Ctx, slug: str) -> AsyncIterator[tuple[Unit, Actor, OrganizationRecord]]:
    """A unit of work in the organization `slug`, for the caller."""
    actor = info.context.require_actor()
    async with info.context.app.unit() as unit:
        org = await accounts.org_for(unit.session, actor, slug)
        yield unit, actor, org


async def scope_of(unit: Unit, org: OrganizationRecord, folder: str | None, stack: str | None) -> Scope:
    if folder is not None and stack is not None:
        raise InvalidRequest("Name a folder or a stack, not both.", field="folder")
    if stack is not None:
        return await catalog.stack_by_slug(unit.session, org, stack)
    if folder is not None:
        return await catalog.folder_by_path(unit.session, org, folder.strip("/"))
    return org


def fresh(info: Ctx) -> Loaders:
    # Each mutation's result is read after its commit, with loaders that have seen nothing before.
    return Loaders(info.context.app)


@strawberry.type
class Mutation(AccessMutation, SsoMutation):
    @strawberry.mutation(
        description="Queues a run of the stack: at the branch's tip, or at `commit` (a full SHA that an "
        "earlier run of the stack planned; not for drift runs), as Retry does."
    )
    async def start_run(
        self, info: Ctx, org: str, stack: str, type: RunType, commit: str | None = None
    ) -> StartRunResult:
        async def work() -> Run:
            async with org_unit(info, org) as (unit, actor, org_row):
                stack_row = await catalog.stack_by_slug(unit.session, org_row, stack)
                body = {"type": type} if commit is None else {"type": type, "commit": commit}
                run = await runs.start_run(unit, actor, stack_row, command(StartRun, body))
            return Run(row=run, loaders=fresh(info))

        return await typed(INPUT_ERRORS, work)

    @strawberry.mutation(
        description="Approves a run awaiting approval. With confirm_destructive on, `acknowledged` must hold "
        "every address that will be deleted or replaced. `comment` (at most 2,000 characters) is shown "
        "on the run, in its notifications and in the audit trail."
    )
    async def approve_run(
        self,
        info: Ctx,
        org: str,
        run_id: strawberry.ID,
        acknowledged: list[str] | None = None,
        comment: str | None = None,
    ) -> ApproveRunResult:
        async def work() -> Run:
            async with org_unit(info, org) as (unit, actor, org_row):
                approval = command(ApproveRun, {"acknowledged": list(acknowledged or []), "comment": comment})
                run = await runs.approve_run(unit, actor, org_row, str(run_id), approval)
            return Run(row=run, loaders=fresh(info))

        return await typed(APPROVE_ERRORS, work)

    @strawberry.mutation(
        description="Discards a run awaiting approval; `comment` (at most 2,000 characters) as for approveRun."
    )
    async def discard_run(
        self, info: Ctx, org: str, run_id: strawberry.ID, comment: str | None = None
    ) -> DiscardRunResult:
        async def work() -> Run:
            async with org_unit(info, org) as (unit, actor, org_row):
                discard = command(DiscardRun, {"comment": comment})
                run = await runs.discard_run(unit, actor, org_row, str(run_id), discard)
            return Run(row=run, loaders=fresh(info))

        return await typed(DISCARD_ERRORS, work)

    @strawberry.mutation(description="Cancels a queued or apply_queued run; running runs cannot be canceled.")
    async def cancel_run(self, info: Ctx, org: str, run_id: strawberry.ID) -> CancelRunResult:
        async def work() -> Run:
            async with org_unit(info, org) as (unit, actor, org_row):
                run = await runs.cancel_run(unit, actor, org_row, str(run_id), CancelRun())
            return Run(row=run, loaders=fresh(info))

        return await typed(CANCEL_ERRORS, work)

    @strawberry.mutation(
        description="Creates the folder and any missing parents; an existing folder is returned."
    )
    async def create_folder(self, info: Ctx, org: str, path: str) -> CreateFolderResult:
        async def work() -> Folder:
            async with org_unit(info, org) as (unit, _, org_row):
                folder, _ = await catalog.ensure_folder(
                    unit.session, org_row, command(CreateFolder, {"path": path})
                )
            return Folder(row=folder, loaders=fresh(info))

        return await typed(INPUT_ERRORS, work)

    @strawberry.mutation
    async def create_stack(self, info: Ctx, org: str, input: CreateStackInput) -> CreateStackResult:
        async def work() -> Stack:
            async with org_unit(info, org) as (unit, _, org_row):
                new_stack = command(CreateStack, vars(input))
                stack = await catalog.create_stack(unit.session, info.context.app.keyring, org_row, new_stack)
            if stack.trigger != StackTrigger.MANUAL:
                # Only commits after the branch's head now start runs.
                await set_baseline(info.context.app, stack.id)
            return Stack(row=stack, loaders=fresh(info))

        return await typed(STACK_ERRORS, work)

    @strawberry.mutation(
        description="Settings of the organization, or of a folder (by path) or a stack (by slug)."
    )
    async def update_settings(
        self, info: Ctx, org: str, input: SettingsInput, folder: str | None = None, stack: str | None = None
    ) -> UpdateSettingsResult:
        given = {name: value for name, value in vars(input).items() if value is not strawberry.UNSET}

        async def work() -> Settings:
            async with org_unit(info, org) as (unit, _, org_row):
                changes = command(PatchSettings, given)
                scope = await scope_of(unit, org_row, folder, stack)
                scope = await inherited.patch_settings(unit.session, scope, changes)
            return Settings(scope=scope, loaders=fresh(info))

        return await typed(INPUT_ERRORS, work)

    @strawberry.mutation(
        description="Sets a variable of the organization, a folder or a stack. A sensitive value is write-only. "
        "`value` may be any JSON value; non-strings reach Terraform as their JSON type."
    )
    async def set_variable(
        self,
        info: Ctx,
        org: str,
        name: str,
        value: JSON,
        sensitive: bool = False,
        kind: VariableKind = VariableKind.TERRAFORM,
        folder: str | None = None,
        stack: str | None = None,
    ) -> SetVariableResult:
        async def work() -> Variable:
            async with org_unit(info, org) as (unit, _, org_row):
                put = command(
                    PutVariable, {"name": name, "value": value, "sensitive": sensitive, "kind": kind}
                )
                scope = await scope_of(unit, org_row, folder, stack)
                variable = await inherited.put_variable(unit.session, info.context.app.keyring, scope, put)
            return Variable(row=variable, loaders=fresh(info))

        return await typed(INPUT_ERRORS, work)

    @strawberry.mutation
    async def delete_variable(
        self, info: Ctx, org: str, name: str, folder: str | None = None, stack: str | None = None
    ) -> DeleteVariableResult:
        async def work() -> DeletedVariable:
            async with org_unit(info, org) as (unit, _, org_row):
                scope = await scope_of(unit, org_row, folder, stack)
                await inherited.delete_variable(unit.session, scope, name)
            return DeletedVariable(name=name)

        return await typed(INPUT_ERRORS, work)

    @strawberry.mutation(description="Adds a notification destination.")
    async def create_notification(self, info: Ctx, org: str, input: NotificationInput) -> NotificationResult:
        app = info.context.app

        async def work() -> NotificationDestination:
            async with org_unit(info, org) as (unit, _, org_row):
                destination_id = await destinations.create_destination(
                    unit.session,
                    app.keyring,
                    org_row,
                    command(CreateNotification, {k: v for k, v in vars(input).items() if v is not None}),
                    allow_private=app.settings.allow_private_webhooks,
                )
                org_id = org_row.id
            return await destination_of(fresh(info), org_id, destination_id)

        return await typed(INPUT_ERRORS, work)

    @strawberry.mutation(description="Changes a notification destination.")
    async def update_notification(
        self, info: Ctx, org: str, id: strawberry.ID, input: NotificationPatchInput
    ) -> NotificationResult:
        app = info.context.app
        given = {name: value for name, value in vars(input).items() if value is not strawberry.UNSET}

        async def work() -> NotificationDestination:
            async with org_unit(info, org) as (unit, _, org_row):
                await destinations.patch_destination(
                    unit.session,
                    app.keyring,
                    org_row,
                    str(id),
                    command(PatchNotification, given),
                    allow_private=app.settings.allow_private_webhooks,
                )
                org_id = org_row.id
            return await destination_of(fresh(info), org_id, str(id))

        return await typed(INPUT_ERRORS, work)

    @strawberry.mutation(description="Deletes a notification destination and its delivery history.")
    async def delete_notification(self, info: Ctx, org: str, id: strawberry.ID) -> DeleteNotificationResult:
        async def work() -> DeletedNotification:
            async with org_unit(info, org) as (unit, _, org_row):
                await destinations.delete_destination(unit.session, org_row, str(id))
            return DeletedNotification(id=id)

        return await typed(INPUT_ERRORS, work)

    @strawberry.mutation(description="Posts a test message to the destination now (once, never retried).")
    async def test_notification(self, info: Ctx, org: str, id: strawberry.ID) -> NotificationDeliveryResult:
        app = info.context.app

        async def work() -> NotificationDelivery:
            async with org_unit(info, org) as (unit, _, org_row):
                delivery_id = await destinations.add_test_delivery(unit.session, org_row, str(id))
            await send_test_delivery(app, delivery_id)
            async with fresh(info).reads.session() as session:
                return delivery_of(await notification_reads.delivery(session, delivery_id))

        return await typed(INPUT_ERRORS, work)

    @strawberry.mutation(
        description="Releases the state lock of a stack's unit (\".\" or a Terragrunt unit's path), "
        "whoever holds it (admin). Returns the unit's state, unlocked."
    )
    async def force_unlock(self, info: Ctx, org: str, stack: str, unit: str = ".") -> ForceUnlockResult:
        async def work() -> StackState:
            async with org_unit(info, org) as (work_unit, actor, org_row):
                stack_row = await catalog.stack_by_slug(work_unit.session, org_row, stack)
                unit_path = normalize_unit(unit)
                caller = StateCaller(org=org_row, stack=stack_row, actor=actor)
                if await locks.force_unlock(work_unit.session, caller, unit_path) is not None:
                    await locks.person_lock_changed(work_unit, stack_row.id)
            return await state_of(fresh(info), stack_row, unit_path)

        return await typed(INPUT_ERRORS, work)
