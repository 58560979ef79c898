"""Expected failures as data, and what becomes of the others.

A mutation returns a union of its success type and the error types it can meet, so clients
switch on `__typename`. Failures outside a mutation's union (and those of queries and
subscriptions) become GraphQL errors carrying the same `code` as the REST API in
`extensions`; anything unexpected is logged and reaches the client only as "Unexpected error.".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from functools import lru_cache
from typing import Any, TypeVar

import strawberry
from graphql import DocumentNode, GraphQLError, StringValueNode, Visitor, visit
from strawberry.extensions import MaskErrors, SchemaExtension
from strawberry.types import ExecutionContext

from firstlume.api.graphql.enums import RunStatus
from firstlume.domain.errors import (
    AcknowledgementRequired,
    AlreadyExists,
    Conflict,
    FirstlumeError,
    InvalidRequest,
    InvalidStatus,
    NotFound,
    StorageUnavailable,
)
from firstlume.services.policies.engine import PolicyCompileError
from firstlume.services.storage import storage_failure

log = logging.getLogger("firstlume.api.graphql")
T = TypeVar("T")


def camel(name: str | None) -> str | None:
    if not name:
        return name
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@strawberry.interface(description="An expected failure, returned as data. `code` matches the REST API's.")
class Error:
    code: str
    message: str


@strawberry.type
class NotFoundError(Error):
    pass


@strawberry.type
class InvalidInputError(Error):
    field: str | None = strawberry.field(description="The argument or input field that was refused.")


@strawberry.type(description="A policy's Rego module does not compile: where, and why (`message`).")
class RegoCompileError(Error):
    line: int | None
    column: int | None


@strawberry.type
class AlreadyExistsError(Error):
    field: str | None


@strawberry.type(
    description="The run's status forbids this: approve or discard a run not awaiting approval, "
    "cancel a run that is not queued or apply_queued. `status` is the run's current status."
)
class InvalidStatusError(Error):
    status: RunStatus


@strawberry.type(
    description="confirm_destructive is on and these deleted or replaced addresses were not acknowledged."
)
class AcknowledgementRequiredError(Error):
    missing: list[str]


@strawberry.type(description="Somebody else changed the run or holds the stack's lock; read it again.")
class ConflictError(Error):
    pass


def _status(error: FirstlumeError) -> RunStatus:
    return RunStatus(str(error.details.get("status")))


def as_error_type(error: FirstlumeError) -> Error | None:
    match error:
        case AcknowledgementRequired():
            return AcknowledgementRequiredError(
                code=error.code, message=error.message, missing=list(error.missing)
            )
        case InvalidStatus():
            return InvalidStatusError(code=error.code, message=error.message, status=_status(error))
        case AlreadyExists():
            return AlreadyExistsError(
                code=error.code, message=error.message, field=camel(error.details.get("field"))
            )
        case Conflict():
            return ConflictError(code=error.code, message=error.message)
        case NotFound():
            return NotFoundError(code=error.code, message=error.message)
        case PolicyCompileError():
            return RegoCompileError(
                code=error.code,
                message=error.message,
                line=error.details.get("line"),
                column=error.details.get("column"),
            )
        case InvalidRequest():
            return InvalidInputError(
                code=error.code, message=error.message, field=camel(error.details.get("field"))
            )
    return None


async def typed(allowed: tuple[type, ...], work: Callable[[], Awaitable[T]]) -> T | Any:
    """Runs a mutation's work; an expected failure among `allowed` becomes its typed result,
    any other one a GraphQL error."""
    try:
        return await work()
    except FirstlumeError as error:
        result = as_error_type(error)
        if result is None or not isinstance(result, allowed):
            raise
        return result


class ErrorPolicy(MaskErrors):
    """FirstlumeErrors become GraphQL errors with their code; any other exception raised by a
    resolver is replaced by "Unexpected error.", so no detail or trace reaches a client.
    Validation errors (wrong types, unknown fields, too deep) pass as graphql-core words them."""

    def __init__(self) -> None:
        super().__init__(should_mask_error=raised_by_resolver)

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        original = error.original_error
        if original is not None and not isinstance(original, FirstlumeError):
            # A full disk or a read-only database is no bug: the client gets its sentence.
            original = storage_failure(original) or original
        if isinstance(original, FirstlumeError):
            details = {k: camel(v) if k == "field" else v for k, v in original.details.items()}
            extensions = {"code": original.code, **details}
            return GraphQLError(
                original.message,
                error.nodes,
                error.source,
                error.positions,
                error.path,
                extensions=extensions,
            )
        masked = super().anonymise_error(error)
        masked.extensions = {"code": "internal_error"}
        return masked


def _note_storage_failure(execution_context: ExecutionContext | None, error: StorageUnavailable) -> None:
    """For /readyz (services/storage.py StorageWatch)."""
    context = execution_context.context if execution_context is not None else None
    app = getattr(context, "app", None)
    if app is not None:
        app.storage.failed(error)


def storage_error_in(response_data: object) -> bool:
    """Whether a GraphQL answer (or a batch of them) carries a `storage_unavailable` error."""
    answers = response_data if isinstance(response_data, list) else [response_data]
    return any(
        isinstance(error, dict) and (error.get("extensions") or {}).get("code") == StorageUnavailable.code
        for answer in answers
        if isinstance(answer, dict)
        for error in answer.get("errors") or []
    )


def raised_by_resolver(error: GraphQLError) -> bool:
    return error.original_error is not None and not isinstance(error.original_error, GraphQLError)


def log_unexpected(errors: list[GraphQLError], execution_context: ExecutionContext | None) -> None:
    for error in errors:
        if isinstance(error.original_error, StorageUnavailable):
            _note_storage_failure(execution_context, error.original_error)
        if raised_by_resolver(error) and not isinstance(error.original_error, FirstlumeError):
            assert error.original_error is not None
            storage = storage_failure(error.original_error)
            if storage is not None:
                log.error("GraphQL resolver at %s: %s", error.path, storage.message)
                _note_storage_failure(execution_context, storage)
                continue
            log.error(
                "unexpected error in a GraphQL resolver at %s", error.path, exc_info=error.original_error
            )


class RejectNulCharacters(SchemaExtension):
    """PostgreSQL text cannot hold NUL, so a lookup by such a string would fail in the database;
    such input is refused up front, like any other invalid input."""

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        if _has_nul(context.variables) or (
            context.graphql_document
            and context.query
            and _literal_has_nul(context.query, context.graphql_document)
        ):
            # Set before validation runs, these take its place.
            context.pre_execution_errors = [
                GraphQLError(
                    "Text may not contain NUL (\\u0000) characters.", extensions={"code": "invalid_request"}
                )
            ]
        yield


class _NulFinder(Visitor):
    found = False

    def enter_string_value(self, node: StringValueNode, *_: object) -> None:
        self.found = self.found or "\x00" in node.value


@lru_cache(maxsize=256)
def _has_nul_literal(query: str, document: DocumentNode) -> bool:
    finder = _NulFinder()
    visit(document, finder)
    return finder.found


def _literal_has_nul(query: str, document: DocumentNode) -> bool:
    """Whether a string literal of the document holds NUL. Only a raw NUL or a unicode escape
    (\\u0000, \\u{0}) can put one there, so other texts are not walked; the rest are walked
    once per distinct text."""
    if "\x00" not in query and "\\u" not in query:
        return False
    return _has_nul_literal(query, document)


def _has_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False
