"""Mutations that delete and move things: deleteStack, moveFolder, deleteFolder (services/removal.py,
services/catalog.py). A stack's rename, move and credentials are updateStack's. Merged into the
Mutation root (schema.py)."""

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
from firstlume.api.graphql.types import Folder
from firstlume.api.graphql.types.catalog import DeletedStack
from firstlume.api.validation import command
from firstlume.services import catalog, removal
from firstlume.services.commands import DeleteStack, MoveFolder


@strawberry.type
class DeletedFolder:
    path: str


DeleteStackResult = Annotated[
    DeletedStack | NotFoundError | ConflictError | InvalidInputError, strawberry.union("DeleteStackResult")
]
MoveFolderResult = Annotated[
    Folder | NotFoundError | InvalidInputError | AlreadyExistsError, strawberry.union("MoveFolderResult")
]
DeleteFolderResult = Annotated[
    DeletedFolder | NotFoundError | ConflictError, strawberry.union("DeleteFolderResult")
]


@strawberry.type
class RemovalMutation:
    @strawberry.mutation(
        description="Deletes a stack: refused (ConflictError) while a run is active or its managed state "
        "holds resources, unless `force` (which cancels or discards the runs that wait; a running phase "
        "still refuses). It is kept, readable by admins, for the retention period."
    )
    async def delete_stack(self, info: Ctx, org: str, stack: str, force: bool = False) -> DeleteStackResult:
        retention = info.context.app.settings.deleted_stack_retention_days

        async def work() -> DeletedStack:
            async with org_unit(info, org) as (unit, actor, org_row):
                deleted = await removal.delete_stack(
                    unit, actor, org_row, stack, command(DeleteStack, {"force": force})
                )
                found, _ = await removal.deleted_stack(unit.session, org_row.id, deleted.id)
            return DeletedStack.of(found, retention)

        return await typed((NotFoundError, ConflictError, InvalidInputError), work)

    @strawberry.mutation(
        description="Renames or moves a folder (with its subfolders and stacks) to `newPath`; missing parents are created."
    )
    async def move_folder(self, info: Ctx, org: str, path: str, new_path: str) -> MoveFolderResult:
        async def work() -> Folder:
            async with org_unit(info, org) as (unit, _, org_row):
                moved = await catalog.move_folder(
                    unit.session, org_row, path, command(MoveFolder, {"path": new_path})
                )
            return Folder(row=moved, loaders=fresh(info))

        return await typed((NotFoundError, InvalidInputError, AlreadyExistsError), work)

    @strawberry.mutation(
        description="Deletes an empty folder (ConflictError while it holds folders or stacks)."
    )
    async def delete_folder(self, info: Ctx, org: str, path: str) -> DeleteFolderResult:
        async def work() -> DeletedFolder:
            async with org_unit(info, org) as (unit, _, org_row):
                await removal.delete_folder(unit.session, org_row, path)
            return DeletedFolder(path=path.strip("/"))

        return await typed((NotFoundError, ConflictError), work)
