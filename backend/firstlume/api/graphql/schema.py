"""The schema: roots, error policy and cost limits. `firstlume export-schema` prints it."""

from __future__ import annotations

import strawberry
from graphql import GraphQLError
from strawberry.extensions import MaxAliasesLimiter, MaxTokensLimiter, QueryDepthLimiter
from strawberry.types import ExecutionContext

from firstlume.api.graphql.errors import ErrorPolicy, RejectNulCharacters, log_unexpected
from firstlume.api.graphql.mutations import Mutation
from firstlume.api.graphql.queries import Query
from firstlume.api.graphql.subscriptions import Subscription

# The deepest useful query (organization → stack → runs → nodes → changes → groups → changes →
# attributes) is 8 levels; folder trees get a few more. Aliases and tokens bound the breadth.
MAX_DEPTH = 12
MAX_ALIASES = 30
MAX_TOKENS = 5000


class DepthLimit(QueryDepthLimiter):
    def __init__(self) -> None:
        super().__init__(max_depth=MAX_DEPTH)


class AliasLimit(MaxAliasesLimiter):
    def __init__(self) -> None:
        super().__init__(max_alias_count=MAX_ALIASES)


class TokenLimit(MaxTokensLimiter):
    def __init__(self) -> None:
        super().__init__(max_token_count=MAX_TOKENS)


class FirstlumeSchema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        # Expected failures and invalid queries are the client's business; only the rest is logged.
        log_unexpected(errors, execution_context)


schema = FirstlumeSchema(
    query=Query,
    mutation=Mutation,
    subscription=Subscription,
    extensions=[ErrorPolicy, RejectNulCharacters, DepthLimit, AliasLimit, TokenLimit],
)
