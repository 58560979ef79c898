"""The log shipper against a minimal `/logs` endpoint with the protocol's offset semantics.

The endpoint runs behind httpx.MockTransport, under the real ExecutorClient (its retries
included; backoff sleeps are skipped). It appends at the end, skips what it already holds,
answers 409 log_gap past the end, and can be told to fail in the ways a network fails.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import pytest

from firstlume.executor.client import ControlPlaneUnavailable, ExecutorClient, RequestRejected, Unauthorized
from firstlume.executor.logs import MASK, LogShipper, Masker, secret_strings


@dataclass
class LogEndpoint:
    text: str = ""
    steps: dict[str, str] = field(default_factory=dict)
    requests: list[dict] = field(default_factory=list)
    # One per request, consumed in order: "down" (connection refused), "503" (refused before
    # storing), "lost_answer" (stored, then 502), "partial" (stores half), "401".
    faults: list[str] = field(default_factory=list)
    received: asyncio.Event = field(default_factory=asyncio.Event)

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/executor/logs"
        assert request.headers["Authorization"] == "Bearer phase-token"
        body = json.loads(request.content)
        self.requests.append(body)
        self.received.set()
        fault = self.faults.pop(0) if self.faults else None
        if fault == "down":
            raise httpx.ConnectError("connection refused", request=request)
        if fault == "503":
            return error(503, "unavailable")
        if fault == "401":
            return error(401, "unauthenticated")
        offset, text = body["offset"], body["text"]
        end = len(self.text)
        if offset > end:
            return error(409, "log_gap", expected_offset=end)
        if fault == "partial":
            text = text[: len(text) // 2]
        new = text[end - offset :]
        self.text += new
        self.steps[body["step"]] = self.steps.get(body["step"], "") + new
        if fault == "lost_answer":
            return error(502, "bad gateway")
        return httpx.Response(200, json={"next_offset": len(self.text)})

    def offsets(self) -> list[int]:
        return [r["offset"] for r in self.requests]


def error(status: int, code: str, **details: object) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": code, **details}})


async def no_sleep(_: float) -> None:
    return None


@pytest.fixture
def endpoint() -> LogEndpoint:
    return LogEndpoint()


def make_client(endpoint: LogEndpoint, max_attempts: int = 4) -> ExecutorClient:
    return ExecutorClient(
        "http://control-plane",
        "phase-token",
        transport=httpx.MockTransport(endpoint.handle),
        max_attempts=max_attempts,
        sleep=no_sleep,
    )


def make_shipper(
    endpoint: LogEndpoint, *, offset: int = 0, secrets: tuple[str, ...] = (), **kw: object
) -> LogShipper:
    return LogShipper(make_client(endpoint), offset=offset, masker=Masker(secrets), **kw)  # type: ignore[arg-type]


async def wait_for(endpoint: LogEndpoint, condition: Callable[[], bool]) -> None:
    """Waits, up to 5 s, until a request to the endpoint makes `condition` true."""
    async with asyncio.timeout(5):
        while not condition():
            await endpoint.received.wait()
            endpoint.received.clear()


# -- masking ---------------------------------------------------------------------------------------


def test_masker_hides_every_occurrence_longest_secret_first() -> None:
    masker = Masker(["abc", "abcdef"])

    assert masker.mask("x=abcdef y=abc abc") == f"x={MASK} y={MASK} {MASK}"


def test_masker_hides_the_json_escaped_form_of_a_secret() -> None:
    masker = Masker(['pa"ss\\word'])

    assert masker.mask('{"password": "pa\\"ss\\\\word"}') == f'{{"password": "{MASK}"}}'


def test_masker_hides_each_line_of_a_multiline_secret() -> None:
    key = "-----BEGIN KEY-----\nAAAABBBB\n-----END KEY-----\n"
    masker = Masker([key])

    assert masker.mask("only the middle: AAAABBBB\n") == f"only the middle: {MASK}\n"


def test_secret_strings_cover_structured_values() -> None:
    found = secret_strings({"user": "admin", "pins": [1234]})

    assert {"admin", "1234"} <= set(found)
    assert secret_strings(True) == [] and secret_strings(None) == []


async def test_secret_written_in_pieces_is_masked_in_its_line(endpoint: LogEndpoint) -> None:
    shipper = make_shipper(endpoint, secrets=("hunter2",))
    shipper.write("plan", "password=hun")
    await shipper.ship()
    shipper.write("plan", "ter2 done\n")
    await shipper.flush()

    assert endpoint.text == f"password={MASK} done\n"


async def test_multiline_secret_split_across_batches_leaves_no_line_of_it(endpoint: LogEndpoint) -> None:
    key = "-----BEGIN KEY-----\nAAAABBBB\nCCCCDDDD\n-----END KEY-----"
    shipper = make_shipper(endpoint, secrets=(key,))
    shipper.write("checkout", "-----BEGIN KEY-----\nAAAABBBB\n")
    await shipper.ship()
    shipper.write("checkout", "CCCCDDDD\n-----END KEY-----\n")
    await shipper.flush()

    assert len(endpoint.requests) == 2
    for secret_line in key.splitlines():
        assert secret_line not in endpoint.text


# -- batching and offsets --------------------------------------------------------------------------


async def test_whole_lines_ship_and_a_partial_line_waits_for_the_flush(endpoint: LogEndpoint) -> None:
    shipper = make_shipper(endpoint)
    shipper.write("init", "first line\nsecond li")
    await shipper.ship()

    assert endpoint.text == "first line\n"

    await shipper.flush()

    assert endpoint.text == "first line\nsecond li"


async def test_timer_ships_lines_without_a_flush(endpoint: LogEndpoint) -> None:
    shipper = make_shipper(endpoint, interval=0.02)
    await shipper.start()
    try:
        shipper.line("init", "Initializing the backend...")
        await wait_for(endpoint, lambda: endpoint.text == "Initializing the backend...\n")
        shipper.line("init", "done")
        await wait_for(endpoint, lambda: endpoint.text.endswith("done\n"))
    finally:
        await shipper.stop()

    assert endpoint.offsets() == [0, len("Initializing the backend...\n")]


async def test_batches_continue_at_the_phase_offset_and_each_belongs_to_one_step(
    endpoint: LogEndpoint,
) -> None:
    endpoint.text = "plan phase text\n"
    shipper = make_shipper(endpoint, offset=len(endpoint.text))
    shipper.line("checkout", "cloning")
    shipper.line("init", "init 1")
    shipper.line("init", "init 2")
    shipper.line("apply", "applying")
    await shipper.flush()

    assert [(r["offset"], r["step"]) for r in endpoint.requests] == [
        (16, "checkout"),
        (24, "init"),
        (38, "apply"),
    ]
    assert endpoint.steps == {"checkout": "cloning\n", "init": "init 1\ninit 2\n", "apply": "applying\n"}
    assert shipper.acknowledged_offset == len(endpoint.text)


async def test_large_output_is_cut_into_batches_at_line_ends(endpoint: LogEndpoint) -> None:
    shipper = make_shipper(endpoint, max_batch_chars=25)
    lines = [f"line {i:03d}\n" for i in range(10)]  # 9 characters each
    shipper.write("plan", "".join(lines))
    await shipper.flush()

    assert endpoint.text == "".join(lines)
    assert all(len(r["text"]) <= 25 and r["text"].endswith("\n") for r in endpoint.requests)


# -- failures --------------------------------------------------------------------------------------


async def test_batch_whose_answer_was_lost_is_retried_at_the_same_offset_without_duplicating(
    endpoint: LogEndpoint,
) -> None:
    endpoint.faults = ["lost_answer"]
    shipper = make_shipper(endpoint)
    shipper.line("plan", "Plan: 1 to add")
    await shipper.flush()

    assert endpoint.offsets() == [0, 0]
    assert endpoint.text == "Plan: 1 to add\n"


async def test_connection_errors_and_5xx_are_retried(endpoint: LogEndpoint) -> None:
    endpoint.faults = ["down", "503", "down"]
    shipper = make_shipper(endpoint)
    shipper.line("init", "hello")
    await shipper.flush()

    assert endpoint.text == "hello\n"
    assert endpoint.offsets() == [0, 0, 0, 0]


async def test_text_is_kept_while_the_control_plane_stays_down_and_sent_once_later(
    endpoint: LogEndpoint,
) -> None:
    endpoint.faults = ["down"] * 4
    shipper = make_shipper(endpoint)
    shipper.line("init", "kept")

    with pytest.raises(ControlPlaneUnavailable, match="failed after 4 attempts"):
        await shipper.flush()
    shipper.line("init", "more")
    await shipper.flush()

    assert endpoint.text == "kept\nmore\n"


async def test_partially_stored_batch_continues_from_the_answered_offset(endpoint: LogEndpoint) -> None:
    endpoint.faults = ["partial"]
    shipper = make_shipper(endpoint)
    shipper.line("plan", "0123456789")
    await shipper.flush()

    assert endpoint.offsets() == [0, 5]
    assert endpoint.text == "0123456789\n"


async def test_log_gap_is_repaired_by_sending_from_the_expected_offset(endpoint: LogEndpoint) -> None:
    endpoint.text = "abc"
    shipper = make_shipper(endpoint, offset=10)
    shipper.line("apply", "first")
    shipper.line("plan", "second")
    await shipper.flush()

    assert endpoint.offsets() == [10, 3, 9]
    assert endpoint.text == "abcfirst\nsecond\n"
    assert shipper.acknowledged_offset == len(endpoint.text)


async def test_a_refused_token_stops_shipping(endpoint: LogEndpoint) -> None:
    endpoint.faults = ["401"]
    shipper = make_shipper(endpoint)
    shipper.line("plan", "text")

    with pytest.raises(Unauthorized):
        await shipper.flush()
    assert shipper.unauthorized


async def test_timer_stops_for_good_on_a_refused_token(endpoint: LogEndpoint) -> None:
    endpoint.faults = ["401"]
    shipper = make_shipper(endpoint, interval=0.02)
    await shipper.start()
    shipper.line("plan", "text")
    assert shipper._task is not None
    async with asyncio.timeout(5):
        await shipper._task  # the timer loop ends by itself

    assert shipper.unauthorized
    assert endpoint.text == ""


# -- the client underneath -------------------------------------------------------------------------


async def test_client_gives_up_after_a_bounded_number_of_attempts(endpoint: LogEndpoint) -> None:
    endpoint.faults = ["503"] * 10
    client = make_client(endpoint, max_attempts=3)

    with pytest.raises(ControlPlaneUnavailable, match="POST /logs failed after 3 attempts; last error: 503"):
        await client.send_logs(0, "plan", "x")
    assert len(endpoint.requests) == 3


async def test_client_raises_other_4xx_with_the_error_code_and_does_not_retry() -> None:
    requests = []

    def refuse(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return error(422, "invalid_request", field="step")

    client = ExecutorClient("http://cp", "t", transport=httpx.MockTransport(refuse), sleep=no_sleep)

    with pytest.raises(RequestRejected) as refused:
        await client.send_logs(0, "plan", "x")
    assert (refused.value.status, refused.value.code, refused.value.details) == (
        422,
        "invalid_request",
        {"field": "step"},
    )
    assert len(requests) == 1


# -- the tail the result carries -------------------------------------------------------------------


async def test_stop_with_tail_hands_back_one_steps_unshipped_text_masked_and_sends_nothing(
    endpoint: LogEndpoint,
) -> None:
    shipper = make_shipper(endpoint, offset=7, secrets=("hunter2",))
    shipper.line("plan", "password hunter2")
    shipper.write("plan", "no newline yet")

    tail = await shipper.stop_with_tail()

    assert tail is not None and endpoint.requests == []
    assert (tail.offset, tail.step, tail.text) == (7, "plan", f"password {MASK}\nno newline yet")
    shipper.delivered(tail)
    assert shipper.acknowledged_offset == tail.end


async def test_stop_with_tail_ships_what_a_result_cannot_carry(endpoint: LogEndpoint) -> None:
    two_steps = make_shipper(endpoint)
    two_steps.line("init", "initialized")
    two_steps.line("plan", "planned")
    assert await two_steps.stop_with_tail() is None  # a result carries one step's text
    assert endpoint.steps == {"init": "initialized\n", "plan": "planned\n"}

    long = make_shipper(endpoint, offset=len(endpoint.text))
    long.line("plan", "x" * 100)
    assert await long.stop_with_tail(max_chars=50) is None  # more than a batch
    assert endpoint.steps["plan"] == "planned\n" + "x" * 100 + "\n"

    nothing = make_shipper(endpoint, offset=len(endpoint.text))
    assert await nothing.stop_with_tail() is None and len(endpoint.requests) == 3  # nothing sent
