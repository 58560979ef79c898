"""JSON from outside (request bodies, GraphQL variables, WebSocket messages) parsed with limits:
Python's own parser takes any nesting until it runs out of stack, integers until they exceed
4,300 digits, and NaN or Infinity, each of which fails later as a 500 or an unstorable value.
Here every such document is refused with one sentence, before anything else sees it."""

from __future__ import annotations

import json
import math
from typing import Any

from firstlume.domain.json_exact import NOT_EXACT, read_exactly

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
    # Most documents: orjson, where it reads the value `json` would. It refuses all that is
    # refused below (NaN, a number too large for a float, invalid UTF-8, nesting past its own
    # limit), so what it refuses goes the slow way, which names the fault.
    value = read_exactly(raw)
    if value is not NOT_EXACT:
        if text_depth_exceeds(raw.encode("utf-8") if isinstance(raw, str) else raw, MAX_JSON_DEPTH):
            raise JsonRefused(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep.")
        return value
    if isinstance(raw, bytes):
        text = raw
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise JsonRefused(f"{what} is not valid UTF-8 text.") from None
    else:
        text = raw.encode("utf-8", "surrogatepass")
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
    if text_depth_exceeds(text, MAX_JSON_DEPTH):
        raise JsonRefused(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep.")
    return value


_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
# Depth does not depend on the kind of bracket: braces are read as square brackets.
_AS_SQUARE = bytes.maketrans(b"{}", b"[]")


def text_depth_exceeds(text: bytes, limit: int) -> bool:
    """Whether the brackets of valid JSON `text` nest deeper than `limit`, read from the text
    at C speed (25 ms for a 16 MB plan; walking the parsed value in Python took 200 ms). Escapes are
    dropped first (an escaped backslash, then an escaped quote), then everything but brackets
    and quotes, then what lies between quotes: the brackets of strings do not count."""
    if b"\\" in text:  # one fast scan; most bodies have no escapes to drop
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    bare = text.translate(_AS_SQUARE, _NOT_STRUCTURE)
    if bare.count(b"[") <= limit:
        return False
    # Two adjacent quotes hold no bracket between them (an empty string, or the end of one
    # string and the start of the next): dropping them leaves every other quote paired as it
    # was, and leaves only the strings that hold brackets, few or none, to split out.
    bare = bare.replace(b'""', b"")
    structure = b"".join(bare.split(b'"')[::2]) if b'"' in bare else bare
    # What is left is balanced brackets. Each round drops every innermost pair, "[]" (one pass
    # that does not look again at what a removal joins), so the depth falls by exactly one a
    # round: still not empty after `limit` rounds, it was deeper. Most bodies empty in a dozen.
    for _ in range(limit):
        if not structure:
            return False
        structure = structure.replace(b"[]", b"")
    return bool(structure)
