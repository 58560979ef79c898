"""Mutations of Git-driven runs: a stack's fields and trigger, and the webhook secret. Merged
into the Mutation root (schema.py)."""

from __future__ import annotations

from typing import Annotated

import strawberry

from firstlume.api.graphql.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    typed,
)
from firstlume.api.graphql.mutations import Ctx, fresh, org_unit
from firstlume.api.graphql.types import Stack
from firstlume.api.graphql.types.pull_requests import GitHost, GitHostKind
from firstlume.api.validation import command
from firstlume.domain.errors import InvalidRequest
from firstlume.domain.git import PullRequestMode, StackTrigger
from firstlume.services import catalog
from firstlume.services.commands import PutGitHost, RotateWebhookSecret, UpdateStack
from firstlume.services.git import deliveries as webhook
from firstlume.services.git import hosts
from firstlume.services.git.polling import set_baseline


@strawberry.type(description="The organization's new webhook secret: shown this once, never again.")
class WebhookSecret:
    secret: str


UpdateStackResult = Annotated[
    Stack | NotFoundError | InvalidInputError | AlreadyExistsError | ConflictError,
    strawberry.union("UpdateStackResult"),
]
PutGitHostResult = Annotated[
    GitHost | NotFoundError | InvalidInputError, strawberry.union("PutGitHostResult")
]
RotateWebhookSecretResult = Annotated[
    WebhookSecret | NotFoundError, strawberry.union("RotateWebhookSecretResult")
]


@strawberry.input(
    description="Only the fields given change. `slug` renames the stack, `folder` moves it (null: the top "
    "level); a Git credential given replaces the stored one, null removes it (write-only)."
)
class UpdateStackInput:
    slug: str | None = strawberry.UNSET
    name: str | None = strawberry.UNSET
    folder: str | None = strawberry.UNSET
    git_https_token: str | None = strawberry.UNSET
    git_ssh_key: str | None = strawberry.UNSET
    repository: str | None = strawberry.UNSET
    branch: str | None = strawberry.UNSET
    path: str | None = strawberry.UNSET
    trigger: StackTrigger | None = strawberry.field(
        default=strawberry.UNSET,
        description="What a new commit on the branch that touches the stack starts: nothing (manual), a plan or an apply.",
    )
    pull_requests: PullRequestMode | None = strawberry.field(
        default=strawberry.UNSET,
        description="What a pull request against the branch that touches the stack starts: nothing (off) or a "
        "proposed plan (plan).",
    )


@strawberry.input(description="Where a Git host's REST API is, and the token to call it with (write-only).")
class GitHostInput:
    kind: GitHostKind
    api_url: str = strawberry.field(
        description="e.g. https://api.github.com, https://gitlab.example.com/api/v4"
    )
    token: str = strawberry.field(description="Write-only: stored sealed, never returned.")


@strawberry.type
class GitMutation:
    @strawberry.mutation(
        description="Creates or replaces a Git host of the organization (admin): commit statuses and pull "
        "request comments for repositories on `host` go to its REST API. As PUT $O/git/hosts/<host>."
    )
    async def put_git_host(self, info: Ctx, org: str, host: str, input: GitHostInput) -> PutGitHostResult:
        async def work() -> GitHost:
            body = {"kind": input.kind.value, "api_url": input.api_url, "token": input.token}
            put = command(PutGitHost, body)
            if not host.strip() or len(host) > 255 or "/" in host:
                raise InvalidRequest("The host must be a Git host's name, such as github.com.", field="host")
            async with org_unit(info, org) as (unit, _, org_row):
                row = await hosts.put_host(unit.session, info.context.app.keyring, org_row, host, put)
            return GitHost.of(row)

        return await typed((NotFoundError, InvalidInputError), work)

    @strawberry.mutation(
        description="Changes a stack's slug (rename), name, folder (move), repository, branch, path, trigger, "
        "pull_requests or Git credentials (rotate or remove)."
    )
    async def update_stack(
        self, info: Ctx, org: str, stack: str, input: UpdateStackInput
    ) -> UpdateStackResult:
        given = {name: value for name, value in vars(input).items() if value is not strawberry.UNSET}

        async def work() -> Stack:
            async with org_unit(info, org) as (unit, _, org_row):
                updated, rebase = await catalog.update_stack(
                    unit.session, info.context.app.keyring, org_row, stack, command(UpdateStack, given)
                )
            if rebase:
                await set_baseline(info.context.app, updated.id)
            return Stack(row=updated, loaders=fresh(info))

        return await typed((NotFoundError, InvalidInputError, AlreadyExistsError, ConflictError), work)

    @strawberry.mutation(
        description="Creates or replaces the organization's webhook secret (admin) and returns it this once."
    )
    async def rotate_webhook_secret(self, info: Ctx, org: str) -> RotateWebhookSecretResult:
        async def work() -> WebhookSecret:
            command(RotateWebhookSecret, {})
            async with org_unit(info, org) as (unit, _, org_row):
                secret = await webhook.rotate_secret(unit, info.context.app.keyring, org_row)
            return WebhookSecret(secret=secret)

        return await typed((NotFoundError,), work)


__all__ = ["GitMutation", "StackTrigger"]
