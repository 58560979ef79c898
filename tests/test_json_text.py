"""The JSON read from requests and written in responses: the depth limit read from the text
(domain/json_input.py) agrees with a walk of the parsed value, whatever the strings hold; and
orjson's output (domain/json_output.py) is the same JSON as `json.dumps`, including what orjson
itself refuses; and JSON columns read back (domain/json_stored.py) as `json` reads them."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from firstlume.domain import json_input, json_output, json_stored
from firstlume.domain.json_input import MAX_JSON_DEPTH, JsonRefused, text_depth_exceeds
from support.examples import examples

# Strings full of what the text reading must see past: brackets, quotes and backslashes.
TRICKY_TEXT = st.text(alphabet='[]{}"\\/ab\n\u00e9\u20ac', max_size=8)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TRICKY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY_TEXT, inner, max_size=3),
    max_leaves=30,
)


def walked_depth_exceeds(value: Any, limit: int) -> bool:
    """The reference: how deep lists and objects nest, read from the parsed value."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


@hypothesis_settings(max_examples=examples(400), deadline=None)
@given(value=JSON_VALUES, limit=st.integers(min_value=0, max_value=6), ascii_only=st.booleans())
def test_the_depth_read_from_the_text_is_the_depth_of_the_value(
    value: Any, limit: int, ascii_only: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert text_depth_exceeds(text, limit) == walked_depth_exceeds(value, limit)


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_the_limit_is_64_levels_and_brackets_in_strings_do_not_count() -> None:
    assert json_input.loads(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(JsonRefused, match=f"nested more than {MAX_JSON_DEPTH} levels deep"):
        json_input.loads(nested(MAX_JSON_DEPTH + 1))
    # Objects and lists alternating count alike, level by level.
    mixed = '{"a":[' * 32 + "1" + "]}" * 32
    assert json_input.loads(mixed) is not None
    with pytest.raises(JsonRefused, match="nested more than"):
        json_input.loads("[" + mixed + "]")
    # A string of brackets, after an escaped quote and an escaped backslash, is text.
    text = json.dumps({"a": ['\\"' + nested(200), "\\", "[[[" * 40]})
    assert json_input.loads(text)["a"][2] == "[[[" * 40
    assert json_input.loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize(
    "value",
    [
        {"plain": [1, 2.5, True, None, "text", "é€ 😀"], "nested": {"a": {"b": []}}},
        {"huge": 123456789012345678901234567890},  # beyond 64 bits: orjson refuses it
        {1: "an integer key", "2": "a string key"},  # orjson refuses keys that are not strings
    ],
)
def test_encoded_json_reads_back_as_json_dumps_writes_it(value: Any) -> None:
    encoded = json_output.dumps(value)
    assert isinstance(encoded, bytes)
    assert json.loads(encoded) == json.loads(json.dumps(value))
    assert json.loads(json_output.dumps_text(value)) == json.loads(json.dumps(value))


# JSON columns as the database gives them back (domain/json_stored.py): orjson where it reads the
# same value as `json`, `json` where it would not.
STORED_TEXTS = [
    "123456789012345678901234567890",  # beyond 64 bits: orjson would read a float
    "-9223372036854775809",
    "18446744073709551616",
    "9223372036854775807",
    "[1e400, NaN, -Infinity]",  # orjson refuses these
    '"\\ud800 a lone surrogate"',
    '{"a": 1, "a": 2}',
    '{"sha": "1234567890123456789012345", "n": 3}',  # digits in a string: read by json, the same
    '[0.1, -0.0, 2.5e-308, 1.7976931348623157e308, "é€😀"]',
]

STORED_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


def _same(text: str) -> None:
    read, expected = json_stored.loads(text), json.loads(text)
    # Through json.dumps, so that an int read as a float (or a key lost) would show.
    assert json.dumps(read) == json.dumps(expected)
    assert json.dumps(json_stored.loads(text.encode())) == json.dumps(expected)


@pytest.mark.parametrize("text", STORED_TEXTS)
def test_stored_json_reads_as_json_reads_it(text: str) -> None:
    _same(text)


@given(STORED_VALUES)
@hypothesis_settings(max_examples=examples(300), deadline=None)
def test_any_stored_json_reads_as_json_reads_it(value: Any) -> None:
    _same(json.dumps(value))


def test_ordinary_stored_json_is_read_without_json(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: Any) -> Any:
        raise AssertionError("read by json")

    monkeypatch.setattr(json_stored, "json", SimpleNamespace(loads=refuse))
    assert json_stored.loads('{"approvers": ["a@example.com"], "serials": {".": 12}, "x": [2.5, null]}') == {
        "approvers": ["a@example.com"],
        "serials": {".": 12},
        "x": [2.5, None],
    }


# Request bodies (domain/json_input.py) take the same fast path, and read the same values as the
# hooked `json` parse that names what it refuses.
def _read_as_json_input_reads_it(text: str) -> None:
    expected = json.loads(text)
    for raw in (text, text.encode()):
        assert json.dumps(json_input.loads(raw)) == json.dumps(expected)


@pytest.mark.parametrize("text", [t for t in STORED_TEXTS if "NaN" not in t])
def test_request_json_reads_as_json_reads_it(text: str) -> None:
    _read_as_json_input_reads_it(text)


@given(STORED_VALUES)
@hypothesis_settings(max_examples=examples(300), deadline=None)
def test_any_request_json_reads_as_json_reads_it(value: Any) -> None:
    text = json.dumps(value)
    try:
        json_input.loads(text)
    except JsonRefused as refused:  # NaN and the infinities only, as before
        assert any(word in str(refused) for word in ("NaN", "Infinity", "too large")), refused
        return
    _read_as_json_input_reads_it(text)


def test_an_ordinary_request_body_is_read_without_json(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("read by json")

    monkeypatch.setattr(json_input, "json", SimpleNamespace(loads=refuse))
    body = b'{"type": "plan", "variables": [{"name": "n", "value": [1, 2.5, null, "\\u00e9"]}]}'
    assert json_input.loads(body) == {
        "type": "plan",
        "variables": [{"name": "n", "value": [1, 2.5, None, "é"]}],
    }
    # Still refused past the depth limit, which orjson's own (1,024) would let through.
    with pytest.raises(JsonRefused, match="nested more than 64 levels"):
        json_input.loads(b"[" * 65 + b"]" * 65)
