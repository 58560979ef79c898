"""The schema: roots, error policy and limits (depth, aliases, tokens, cost: api/graphql/cost.py). `firstlume export-schema` prints it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import strawberry
from graphql import ASTValidationRule, GraphQLError
from strawberry.extensions import (
    AddValidationRules,
    MaxTokensLimiter,
    ParserCache,
    SchemaExtension,
    ValidationCache,
)
from strawberry.extensions.max_aliases import create_validator as aliases_rule
from strawberry.extensions.query_depth_limiter import create_validator as depth_rule
from strawberry.tools import merge_types
from strawberry.types import ExecutionContext

from firstlume import metrics
from firstlume.api.graphql.context import AuthenticateCaller
from firstlume.api.graphql.cost import CostLimit
from firstlume.api.graphql.dependency_mutations import DependencyMutation
from firstlume.api.graphql.errors import ErrorPolicy, RejectNulCharacters, log_unexpected
from firstlume.api.graphql.git_mutations import GitMutation
from firstlume.api.graphql.git_subscriptions import GitSubscription
from firstlume.api.graphql.mutations import Mutation
from firstlume.api.graphql.permissions import TokenStillValid, guard_fields
from firstlume.api.graphql.policy_mutations import PolicyMutation
from firstlume.api.graphql.queries import Query
from firstlume.api.graphql.removal_mutations import RemovalMutation
from firstlume.api.graphql.subscriptions import Subscription
from firstlume.api.graphql.types.catalog import Organization
from firstlume.api.graphql.types.state import StackState

# The deepest useful query (organization → stack → runs → nodes → changes → groups → changes →
# attributes) is 8 levels; folder trees get a few more. Aliases and tokens bound the breadth.
MAX_DEPTH = 12
MAX_ALIASES = 30
MAX_TOKENS = 5000
# Parsed and validated documents kept per process: clients send the same few operations (the
# web UI's), and every subscription would otherwise parse and validate its document again.
CACHED_DOCUMENTS = 256


# The rules are made once: QueryDepthLimiter and MaxAliasesLimiter make new rule classes each
# time they are built (once per operation), which no validation cache could ever match.
LIMIT_RULES: list[type[ASTValidationRule]] = [depth_rule(MAX_DEPTH, None, None), aliases_rule(MAX_ALIASES)]


class Limits(AddValidationRules):
    """No deeper than MAX_DEPTH, no more than MAX_ALIASES aliases."""

    def __init__(self) -> None:
        super().__init__(LIMIT_RULES)


class TokenLimit(MaxTokensLimiter):
    def __init__(self) -> None:
        super().__init__(max_token_count=MAX_TOKENS)


class DocumentCache(ParserCache):
    def __init__(self) -> None:
        super().__init__(maxsize=CACHED_DOCUMENTS)


class ValidatedCache(ValidationCache):
    def __init__(self) -> None:
        super().__init__(maxsize=CACHED_DOCUMENTS)


class RequestMetrics(SchemaExtension):
    """Each query's and mutation's duration in firstlume_graphql_request_duration_seconds;
    subscriptions are counted open in firstlume_active_subscriptions instead."""

    def on_operation(self) -> Iterator[None]:
        started = time.perf_counter()
        yield
        try:
            operation = self.execution_context.operation_type.value
        except Exception:  # not parsed, or no such operation
            operation = "invalid"
        if operation != "subscription":
            metrics.GRAPHQL_DURATION.labels(operation=operation).observe(time.perf_counter() - started)


class FirstlumeSchema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        # Expected failures and invalid queries are the client's business; only the rest is logged.
        log_unexpected(errors, execution_context)


# Every root field, and the nested fields that show more than their parent, check the role the
# permission table names (services/access/permissions.py), before the schema is built.
RootMutation = merge_types(
    "Mutation", (Mutation, GitMutation, RemovalMutation, DependencyMutation, PolicyMutation)
)
RootSubscription = merge_types("Subscription", (Subscription, GitSubscription))
guard_fields([Query, RootMutation, RootSubscription], [StackState, Organization])

schema = FirstlumeSchema(
    query=Query,
    mutation=RootMutation,
    subscription=RootSubscription,
    # In this order: the token limit applies to parsing (and so to what is cached); the cost
    # limit adds its rule before the validation cache validates; the NUL check comes after the
    # validation cache, whose result it replaces when it refuses.
    extensions=[
        RequestMetrics,
        ErrorPolicy,
        TokenLimit,
        DocumentCache,
        Limits,
        CostLimit,
        ValidatedCache,
        RejectNulCharacters,
        TokenStillValid,
        AuthenticateCaller,
    ],
)
