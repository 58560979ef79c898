"""GraphQL of members and tokens: the types, the read fields (Organization.members and
viewerRole, Viewer.tokens) and the mutations (setMember, removeMember, createToken,
revokeToken), which Mutation inherits. Roles are checked by the permission table."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry
from strawberry.types import Info

from firstlume.api.graphql.context import GraphQLContext
from firstlume.api.graphql.errors import ConflictError, InvalidInputError, NotFoundError, typed
from firstlume.api.validation import command
from firstlume.services import accounts
from firstlume.services.access import folder_grants, members, tokens
from firstlume.services.access.commands import CreateToken, PutMember
from firstlume.services.access.tokens import TokenRecord
from firstlume.services.context import Actor
from firstlume.services.reads import ReadScope

Ctx = Info[GraphQLContext, None]
ROLE_DESCRIPTION = "reader, operator or admin"


@strawberry.type(description="A member of an organization: role (reader, operator, admin) and groups.")
class Member:
    email: str
    role: str = strawberry.field(description=ROLE_DESCRIPTION)
    groups: list[str]

    @classmethod
    def of(cls, member: members.Member) -> Member:
        return cls(email=member.email, role=member.role, groups=list(member.groups))


@strawberry.type(description="One of the caller's API tokens; the token itself is shown only once.")
class Token:
    id: strawberry.ID
    name: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    current: bool = strawberry.field(
        default=False,
        description="True for the token this request is authenticated with (the UI marks it: this browser).",
    )

    @classmethod
    def of(cls, row: TokenRecord, current_id: str | None = None) -> Token:
        return cls(
            id=strawberry.ID(row.id),
            name=row.name,
            created_at=row.created_at,
            last_used_at=row.last_used_at,
            expires_at=row.expires_at,
            current=current_id is not None and row.id == current_id,
        )


@strawberry.type(description="A new token: `token` is shown this once and never again.")
class CreatedToken:
    token: str
    info: Token


@strawberry.type
class RemovedMember:
    email: str


SetMemberResult = Annotated[
    Member | NotFoundError | InvalidInputError | ConflictError, strawberry.union("SetMemberResult")
]
RemoveMemberResult = Annotated[
    RemovedMember | NotFoundError | ConflictError, strawberry.union("RemoveMemberResult")
]
CreateTokenResult = Annotated[
    CreatedToken | NotFoundError | InvalidInputError, strawberry.union("CreateTokenResult")
]
RevokeTokenResult = Annotated[Token | NotFoundError, strawberry.union("RevokeTokenResult")]

MEMBER_ERRORS = (NotFoundError, InvalidInputError, ConflictError)


async def members_of(reads: ReadScope, org_id: str) -> list[Member]:
    async with reads.session() as session:
        return [Member.of(m) for m in await members.list_members(session, org_id)]


async def tokens_of(reads: ReadScope, actor: Actor) -> list[Token]:
    async with reads.session() as session:
        return [Token.of(r, actor.token_id) for r in await tokens.list_tokens(session, actor)]


async def callers_grants(reads: ReadScope, org_id: str, actor: Actor) -> folder_grants.Caller | None:
    async with reads.session() as session:
        return await folder_grants.caller_in(session, org_id, actor.user_id)


async def role_of(reads: ReadScope, org_id: str, actor: Actor) -> str | None:
    async with reads.session() as session:
        return await members.role_in(session, actor.user_id, org_id=org_id)


@strawberry.type
class AccessMutation:
    @strawberry.mutation(
        description="Adds a member (by email) with a role and groups, or changes them (admin)."
    )
    async def set_member(
        self, info: Ctx, org: str, email: str, role: str, groups: list[str] | None = None
    ) -> SetMemberResult:
        async def work() -> Member:
            async with info.context.app.unit() as unit:
                org_row = await accounts.org_for(unit.session, info.context.require_actor(), org)
                put = command(PutMember, {"role": role, "groups": list(groups or [])})
                return Member.of(await members.put_member(unit.session, org_row, email, put))

        return await typed(MEMBER_ERRORS, work)

    @strawberry.mutation(description="Removes a member (admin); the last admin cannot be removed.")
    async def remove_member(self, info: Ctx, org: str, email: str) -> RemoveMemberResult:
        async def work() -> RemovedMember:
            async with info.context.app.unit() as unit:
                org_row = await accounts.org_for(unit.session, info.context.require_actor(), org)
                await members.remove_member(unit.session, org_row, email)
            return RemovedMember(email=email)

        return await typed(MEMBER_ERRORS, work)

    @strawberry.mutation(
        description='Creates a token for the caller. `expiresIn` such as "30d", "12h" (null: never). '
        "The token is in the answer only."
    )
    async def create_token(
        self, info: Ctx, org: str, name: str, expires_in: str | None = None
    ) -> CreateTokenResult:
        async def work() -> CreatedToken:
            actor = info.context.require_actor()
            async with info.context.app.unit() as unit:
                org_row = await accounts.org_for(unit.session, actor, org)
                created = await tokens.create_token(
                    unit.session,
                    actor,
                    command(CreateToken, {"name": name, "expires_in": expires_in}),
                    org_row,
                )
                return CreatedToken(token=created.token, info=Token.of(created.row))

        return await typed((NotFoundError, InvalidInputError), work)

    @strawberry.mutation(
        description="Revokes one of the caller's tokens, or (an admin) another member's: refused at once, "
        "subscriptions closed. Audited."
    )
    async def revoke_token(self, info: Ctx, org: str, id: strawberry.ID) -> RevokeTokenResult:
        async def work() -> Token:
            actor = info.context.require_actor()
            async with info.context.app.unit() as unit:
                org_row = await accounts.org_for(unit.session, actor, org)
                return Token.of(await tokens.revoke_token(unit, actor, str(id), org_row))

        return await typed((NotFoundError,), work)
