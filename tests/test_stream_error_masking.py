"""A subscription's results without errors reach the client as they are; an unexpected failure in
the middle of a subscription reaches it as "Unexpected error.", never with its detail, and an
expected one keeps its sentence and code."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from firstlume.api.graphql.errors import ErrorPolicy
from firstlume.api.graphql.schema import FirstlumeSchema
from firstlume.domain.errors import NotFound


@strawberry.type
class Query:
    @strawberry.field
    def ok(self) -> bool:
        return True


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def ticks(self, fail_with: str) -> AsyncGenerator[int, None]:
        yield 1
        yield 2
        if fail_with == "bug":
            raise RuntimeError("password=hunter2 in /srv/secret")
        raise NotFound("No run 'r9' in this organization.")


toy = FirstlumeSchema(query=Query, subscription=Subscription, extensions=[ErrorPolicy])


async def results(fail_with: str) -> list[tuple[object, list[dict[str, object]]]]:
    stream = await toy.subscribe(f'subscription {{ ticks(failWith: "{fail_with}") }}')
    assert not isinstance(stream, strawberry.types.ExecutionResult), stream
    return [
        (result.data, [error.formatted for error in result.errors or ()])  # type: ignore[union-attr]
        async for result in stream
    ]


async def test_an_unexpected_failure_mid_stream_is_masked_after_the_results_without_errors() -> None:
    received = await results("bug")
    assert received[:2] == [({"ticks": 1}, []), ({"ticks": 2}, [])]
    [(data, [error])] = received[2:]
    assert data is None
    assert error["message"] == "Unexpected error."
    assert error["extensions"] == {"code": "internal_error"}
    assert "hunter2" not in str(received)


async def test_an_expected_failure_mid_stream_keeps_its_sentence_and_code() -> None:
    received = await results("expected")
    [(data, [error])] = received[2:]
    assert data is None
    assert error["message"] == "No run 'r9' in this organization."
    assert error["extensions"]["code"] == "not_found"  # type: ignore[index]
