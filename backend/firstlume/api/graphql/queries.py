"""The read side: the caller, their organizations, and everything below them."""

from __future__ import annotations

import strawberry
from strawberry.types import Info

from firstlume.api.graphql.context import GraphQLContext
from firstlume.api.graphql.selections import arguments_of
from firstlume.api.graphql.types import Organization, Viewer
from firstlume.domain.errors import NotFound
from firstlume.services import accounts


@strawberry.type
class Query:
    @strawberry.field(description="The caller (by API token).")
    def viewer(self, info: Info[GraphQLContext, None]) -> Viewer:
        actor = info.context.require_actor()
        return Viewer(actor=actor, loaders=info.context.loaders())

    @strawberry.field(description="The organizations the caller is a member of.")
    async def organizations(self, info: Info[GraphQLContext, None]) -> list[Organization]:
        actor = info.context.require_actor()
        loaders = info.context.loaders()
        async with loaders.reads.session() as session:
            orgs = await accounts.orgs_of(session, actor)
        return [Organization(row=o, loaders=loaders) for o in orgs]

    @strawberry.field(description="Null when there is no such organization or the caller is not a member.")
    async def organization(self, info: Info[GraphQLContext, None], slug: str) -> Organization | None:
        actor = info.context.require_actor()
        loaders = info.context.loaders()
        known = info.context.known_org(slug)
        if known is not None:
            # Read with the caller, before the query ran (org_root.py); a stack not read then is
            # read by its loader.
            org, stacks = known
            if org is None:
                return None
            for known_slug, stack in stacks.items():
                loaders.stacks_by_slug[(org.id, known_slug)] = stack
            return Organization(row=org, loaders=loaders)
        # A query about one stack of the organization (a stack's page) reads it in the same
        # statement as the organization.
        stack_slugs = {args.get("slug") for args in arguments_of(info, "stack")}
        stack_slug = stack_slugs.pop() if len(stack_slugs) == 1 else None
        try:
            async with loaders.reads.session() as session:
                if isinstance(stack_slug, str):
                    org, stack = await accounts.org_and_stack_for(session, actor, slug, stack_slug)
                    loaders.stacks_by_slug[(org.id, stack_slug)] = stack
                else:
                    org = await accounts.org_for(session, actor, slug)
        except NotFound:
            return None
        return Organization(row=org, loaders=loaders)
