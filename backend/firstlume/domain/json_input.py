"""JSON from outside (request bodies, GraphQL variables, WebSocket messages) parsed with limits:
Python's own parser takes any nesting until it runs out of stack, integers until they exceed
4,300 digits, and NaN or Infinity, each of which fails later as a 500 or an unstorable value.
Here every such document is refused with one sentence, before anything else sees it."""

from __future__ import annotations

import json
import math
from typing import Any

# Far deeper than any request Firstlume takes (stack variables, settings, Terraform state), far
# shallower than the interpreter's recursion limit that the parser and validators would hit.
MAX_JSON_DEPTH = 64


class JsonRefused(ValueError):
    """The text is not JSON Firstlume accepts; the message is a sentence for a person."""


def _refuse_constant(name: str) -> Any:
    raise JsonRefused(f"{name} is not a JSON number.")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRefused(f"The number {text[:40]} is too large.")
    return value


def loads(raw: bytes | str, *, what: str = "The request body") -> Any:
    """`raw` as a JSON value, or JsonRefused naming what is wrong with it."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise JsonRefused(f"{what} is not valid UTF-8 text.") from None
    try:
        value = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)
    except JsonRefused as error:
        raise JsonRefused(f"{what} is not accepted: {error}") from None
    except RecursionError:
        raise JsonRefused(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep.") from None
    except json.JSONDecodeError as error:
        raise JsonRefused(f"{what} is not valid JSON: {error}.") from None
    except ValueError as error:
        # int() refuses integers over sys.get_int_max_str_digits() digits.
        if "digits" in str(error):
            raise JsonRefused(f"{what} holds a number with more than 4,300 digits.") from None
        raise JsonRefused(f"{what} is not valid JSON: {error}.") from None
    if depth_exceeds(value, MAX_JSON_DEPTH):
        raise JsonRefused(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep.")
    return value


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether lists and objects nest deeper than `limit`; iterative, so any depth is safe."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False
