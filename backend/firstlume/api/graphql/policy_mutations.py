"""Mutations of policies as code: createPolicy, updatePolicy, deletePolicy, testPolicy (the REST
routes' counterparts, api/rest/policy_routes.py). Merged into the Mutation root (schema.py)."""

from __future__ import annotations

from typing import Annotated

import strawberry
from strawberry.scalars import JSON

from firstlume.api.graphql.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    RegoCompileError,
    typed,
)
from firstlume.api.graphql.mutations import Ctx, org_unit
from firstlume.api.graphql.types.policies import Policy, PolicyCheck
from firstlume.api.validation import command
from firstlume.services.commands import CreatePolicy, TryPolicy, UpdatePolicy
from firstlume.services.policies import authoring, store

PolicyResult = Annotated[
    Policy | RegoCompileError | InvalidInputError | AlreadyExistsError | NotFoundError,
    strawberry.union("PolicyResult"),
]
PolicyCheckResult = Annotated[
    PolicyCheck | InvalidInputError | NotFoundError | ConflictError, strawberry.union("PolicyCheckResult")
]


@strawberry.type
class DeletedPolicy:
    name: str


DeletePolicyResult = Annotated[DeletedPolicy | NotFoundError, strawberry.union("DeletePolicyResult")]
ERRORS = (RegoCompileError, InvalidInputError, AlreadyExistsError, NotFoundError)


@strawberry.type
class PolicyMutation:
    @strawberry.mutation(
        description="Adds a policy; a module that does not compile is refused (RegoCompileError)."
    )
    async def create_policy(
        self, info: Ctx, org: str, name: str, kind: str, rego: str, description: str = ""
    ) -> PolicyResult:
        async def work() -> Policy:
            given = {"name": name, "kind": kind, "rego": rego, "description": description}
            async with org_unit(info, org) as (unit, _, org_row):
                return Policy.of(
                    await store.create_policy(unit.session, org_row.id, command(CreatePolicy, given))
                )

        return await typed(ERRORS, work)

    @strawberry.mutation(description="Changes a policy's module or description.")
    async def update_policy(
        self, info: Ctx, org: str, name: str, rego: str | None = None, description: str | None = None
    ) -> PolicyResult:
        given = {k: v for k, v in (("rego", rego), ("description", description)) if v is not None}

        async def work() -> Policy:
            async with org_unit(info, org) as (unit, _, org_row):
                updated = await store.update_policy(
                    unit.session, org_row.id, name, command(UpdatePolicy, given)
                )
                return Policy.of(updated)

        return await typed(ERRORS, work)

    @strawberry.mutation(description="Deletes a policy.")
    async def delete_policy(self, info: Ctx, org: str, name: str) -> DeletePolicyResult:
        async def work() -> DeletedPolicy:
            async with org_unit(info, org) as (unit, _, org_row):
                await store.delete_policy(unit.session, org_row.id, name)
            return DeletedPolicy(name=name)

        return await typed((NotFoundError,), work)

    @strawberry.mutation(
        description="Evaluates a policy against `input` (the input document) or `run` (a past run's plan)."
    )
    async def test_policy(
        self, info: Ctx, org: str, name: str, input: JSON | None = None, run: str | None = None
    ) -> PolicyCheckResult:
        app = info.context.app
        given = {k: v for k, v in (("input", input), ("run", run)) if v is not None}

        async def work() -> PolicyCheck:
            async with org_unit(info, org) as (_, _, org_row):
                org_id = org_row.id
            checked = await authoring.try_policy(
                app, org_id, name, command(TryPolicy, given), app.settings.policy_time_limit
            )
            return PolicyCheck.of(checked)

        return await typed((InvalidInputError, NotFoundError, ConflictError), work)
