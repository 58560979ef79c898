"""setStackDependencies (adoption-api.md, section 9). Merged into the Mutation root (schema.py)."""

from __future__ import annotations

from typing import Annotated

import strawberry

from firstlume.api.graphql.errors import ConflictError, InvalidInputError, NotFoundError, typed
from firstlume.api.graphql.mutations import Ctx, org_unit
from firstlume.api.graphql.types.dependencies import StackDependencies, dependencies_of
from firstlume.api.validation import command
from firstlume.services import catalog
from firstlume.services.commands import SetDependencies
from firstlume.services.dependencies import config

SetStackDependenciesResult = Annotated[
    StackDependencies | NotFoundError | ConflictError | InvalidInputError,
    strawberry.union("SetStackDependenciesResult"),
]


@strawberry.input(description="An output of the upstream stack and the Terraform variable that receives it.")
class OutputMappingInput:
    output: str
    variable: str


@strawberry.input(description="An upstream stack and which of its outputs this stack reads.")
class DependencyInput:
    stack: str
    outputs: list[OutputMappingInput]


@strawberry.type
class DependencyMutation:
    @strawberry.mutation(
        description="Replaces the stacks whose outputs `stack` reads (ConflictError `dependency_cycle` "
        "when that would make a cycle)."
    )
    async def set_stack_dependencies(
        self, info: Ctx, org: str, stack: str, depends_on: list[DependencyInput]
    ) -> SetStackDependenciesResult:
        async def work() -> StackDependencies:
            async with org_unit(info, org) as (unit, actor, org_row):
                stack_row = await catalog.stack_by_slug(unit.session, org_row, stack)
                body = {
                    "depends_on": [
                        {"stack": d.stack, "outputs": {m.output: m.variable for m in d.outputs}}
                        for d in depends_on
                    ]
                }
                await config.set_dependencies(unit, actor, org_row, stack_row, command(SetDependencies, body))
                found = await config.stack_dependencies(unit.session, org_row.id, stack_row.slug)
            return dependencies_of(found)

        return await typed((NotFoundError, ConflictError, InvalidInputError), work)
