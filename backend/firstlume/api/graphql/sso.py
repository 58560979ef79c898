"""GraphQL of single sign-on and roles per folder: an organization's mapping of the identity
provider's groups and a folder's grants (the read fields on Organization, the mutations
updateSso and setFolderGrants, which Mutation inherits). Roles are checked by the permission
table (admins only)."""

from __future__ import annotations

from typing import Annotated, Any

import strawberry
from strawberry.types import Info

from firstlume.api.graphql.context import GraphQLContext
from firstlume.api.graphql.errors import InvalidInputError, NotFoundError, typed
from firstlume.api.validation import command
from firstlume.services import accounts
from firstlume.services.access import folder_grants, sso_mapping
from firstlume.services.access.commands import PutSso
from firstlume.services.reads import ReadScope
from firstlume.services.reads.catalog import OrganizationRecord

Ctx = Info[GraphQLContext, None]


@strawberry.type(description="What one of the identity provider's groups gives in this organization.")
class SsoGroupMapping:
    idp_group: str
    role: str
    groups: list[str]


@strawberry.type(
    description="The organization's mapping of the identity provider's groups, applied at each sign-in."
)
class SsoMapping:
    groups: list[SsoGroupMapping]
    default_role: str | None = strawberry.field(
        description="The role of a person whose groups map to nothing; null: such a person is no member."
    )

    @classmethod
    def of(cls, answer: dict[str, Any]) -> SsoMapping:
        groups = answer["groups"]
        return cls(
            groups=[
                SsoGroupMapping(idp_group=name, role=entry["role"], groups=list(entry["groups"]))
                for name, entry in sorted(groups.items())
            ],
            default_role=answer["default_role"],
        )


@strawberry.input
class SsoGroupInput:
    idp_group: str
    role: str
    groups: list[str] = strawberry.field(default_factory=list)


@strawberry.type(description="A role on a folder and everything under it, for user:<email> or group:<name>.")
class FolderGrant:
    principal: str
    role: str
    origin: str = strawberry.field(description="The folder the grant is set on.")


@strawberry.type(description="A folder's own grants, and every grant that reaches it, with origins.")
class FolderGrants:
    path: str
    grants: list[FolderGrant]
    effective: list[FolderGrant]

    @classmethod
    def of(cls, answer: dict[str, Any]) -> FolderGrants:
        path = answer["path"]
        return cls(
            path=path,
            grants=[FolderGrant(principal=p, role=r, origin=path) for p, r in answer["grants"].items()],
            effective=[FolderGrant(**entry) for entry in answer["effective"]],
        )


@strawberry.input
class FolderGrantInput:
    principal: str
    role: str


UpdateSsoResult = Annotated[
    SsoMapping | NotFoundError | InvalidInputError, strawberry.union("UpdateSsoResult")
]
SetFolderGrantsResult = Annotated[
    FolderGrants | NotFoundError | InvalidInputError, strawberry.union("SetFolderGrantsResult")
]


async def sso_of(reads: ReadScope, org: OrganizationRecord) -> SsoMapping:
    async with reads.session() as session:
        return SsoMapping.of(await sso_mapping.get_mapping(session, org))


async def grants_of(reads: ReadScope, org: OrganizationRecord, path: str) -> FolderGrants:
    async with reads.session() as session:
        return FolderGrants.of(await folder_grants.get_grants(session, org, path))


@strawberry.type
class SsoMutation:
    @strawberry.mutation(
        description="Replaces the organization's mapping of the identity provider's groups (admin; audited)."
    )
    async def update_sso(
        self, info: Ctx, org: str, groups: list[SsoGroupInput], default_role: str | None = None
    ) -> UpdateSsoResult:
        async def work() -> SsoMapping:
            body = {
                "groups": {g.idp_group: {"role": g.role, "groups": list(g.groups)} for g in groups},
                "default_role": default_role,
            }
            async with info.context.app.unit() as unit:
                org_row = await accounts.org_for(unit.session, info.context.require_actor(), org)
                return SsoMapping.of(
                    await sso_mapping.put_mapping(unit.session, org_row, command(PutSso, body))
                )

        return await typed((NotFoundError, InvalidInputError), work)

    @strawberry.mutation(
        description="Replaces a folder's grants (admin; audited); they raise roles, never lower them."
    )
    async def set_folder_grants(
        self, info: Ctx, org: str, path: str, grants: list[FolderGrantInput]
    ) -> SetFolderGrantsResult:
        async def work() -> FolderGrants:
            body = {"grants": {g.principal: g.role for g in grants}}
            async with info.context.app.unit() as unit:
                org_row = await accounts.org_for(unit.session, info.context.require_actor(), org)
                return FolderGrants.of(await folder_grants.put_grants(unit.session, org_row, path, body))

        return await typed((NotFoundError, InvalidInputError), work)
