"""A log chunk that many subscribers receive alike is executed once: every subscription of the same
operation gets the very result the first one made, with its own root arguments (`fromOffset`,
the run) set aside; anything that could change the result (another selection, a variable the
selection uses, another chunk, an error) gets its own. The end-to-end tests of many subscribers
(test_graphql_live.py, test_log_tails.py) check that each still gets exactly its text."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from graphql import ExecutionResult, parse

from firstlume.api.graphql.schema import schema
from firstlume.api.graphql.shared_events import SharedEventExecutor, shared_chunk
from firstlume.api.graphql.types.runs import LogChunk
from firstlume.services.logs import SHARED_SLICE_CHARS, LogSlice

RUN_LOG = """subscription($org: String!, $id: ID!, $from: Int!) {
  runLog(org: $org, runId: $id, fromOffset: $from) { text nextOffset } }"""
WITH_TIMES = """subscription($org: String!, $id: ID!, $times: Boolean!) {
  runLog(org: $org, runId: $id) { text times @include(if: $times) { index } } }"""
AT = datetime(2026, 12, 1, tzinfo=UTC)


def subscriber(document: str, variables: dict[str, Any]) -> SharedEventExecutor:
    """The executor graphql-core builds for one subscription (each parses its own document)."""
    executor = SharedEventExecutor.build(schema._schema, parse(document), raw_variable_values=variables)
    assert isinstance(executor, SharedEventExecutor), executor
    return executor


def event(executor: SharedEventExecutor, payload: object) -> ExecutionResult:
    result = executor.build_per_event_executor(payload).execute_operation(False)
    assert isinstance(result, ExecutionResult)
    return result


def test_subscribers_of_one_operation_share_each_chunks_result_whatever_their_offsets() -> None:
    first_line = shared_chunk(LogSlice("Cloning\n", 8, ((0, AT),)))
    viewers = [subscriber(RUN_LOG, {"org": "acme", "id": "r1", "from": offset}) for offset in (0, 0, 3, 8)]
    results = [event(viewer, first_line) for viewer in viewers]
    assert results[0].data == {"runLog": {"text": "Cloning\n", "nextOffset": 8}}
    assert not results[0].errors
    assert all(result is results[0] for result in results)

    # The tails give equal slices one payload, and a new chunk has a result of its own.
    assert shared_chunk(LogSlice("Cloning\n", 8, ((0, AT),))) is first_line
    second_line = shared_chunk(LogSlice("HEAD is now at 1a2b3c4\n", 31, ((0, AT),)))
    second = [event(viewer, second_line) for viewer in viewers]
    assert second[0].data == {"runLog": {"text": "HEAD is now at 1a2b3c4\n", "nextOffset": 31}}
    assert all(result is second[0] for result in second)


def test_a_different_selection_or_a_variable_the_selection_uses_gets_its_own_result() -> None:
    chunk = shared_chunk(LogSlice("plan\n", 5, ((0, AT),)))
    plain = event(subscriber(RUN_LOG, {"org": "acme", "id": "r1", "from": 0}), chunk)
    with_times = event(subscriber(WITH_TIMES, {"org": "acme", "id": "r1", "times": True}), chunk)
    without_times = event(subscriber(WITH_TIMES, {"org": "acme", "id": "r1", "times": False}), chunk)
    assert plain.data == {"runLog": {"text": "plan\n", "nextOffset": 5}}
    assert with_times.data == {"runLog": {"text": "plan\n", "times": [{"index": 0}]}}
    assert without_times.data == {"runLog": {"text": "plan\n"}}
    again = event(subscriber(WITH_TIMES, {"org": "acme", "id": "r2", "times": True}), chunk)
    assert again is with_times


def test_payloads_of_other_types_and_results_with_errors_are_never_shared() -> None:
    # Not a shared type: each subscriber's own execution.
    plain_object = type("Chunk", (), {"text": "x", "next_offset": 1, "times": []})()
    viewers = [subscriber(RUN_LOG, {"org": "acme", "id": "r1", "from": 0}) for _ in range(2)]
    results = [event(viewer, plain_object) for viewer in viewers]
    assert results[0].data == results[1].data == {"runLog": {"text": "x", "nextOffset": 1}}
    assert results[0] is not results[1]

    # A chunk whose field cannot be served (text must not be null) gives an error, and the next
    # subscriber's execution meets the error itself.
    broken = LogChunk(text=None, next_offset=1)  # type: ignore[arg-type]
    failed = [event(viewer, broken) for viewer in viewers]
    assert all(result.errors for result in failed)
    assert failed[0] is not failed[1]


def test_a_long_slice_is_its_readers_alone_and_is_not_kept() -> None:
    """A page of stored log that a reader catches up with can be megabytes: keeping hundreds of
    those would hold as many megabytes for nothing."""
    text = "x" * (SHARED_SLICE_CHARS + 1)
    assert shared_chunk(LogSlice(text, len(text))) is not shared_chunk(LogSlice(text, len(text)))
    short = "y" * SHARED_SLICE_CHARS
    assert shared_chunk(LogSlice(short, len(short))) is shared_chunk(LogSlice(short, len(short)))
