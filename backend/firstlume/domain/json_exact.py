"""JSON text read by orjson, where orjson reads exactly the value that `json` reads.

orjson reads a plan of 16 MB in about four fifths of `json`'s time, and more than twice as fast as
`json` with the hooks that refuse non-finite numbers (domain/json_input.py). But it reads an
integer beyond 64 bits as a float, which would change the value, and it refuses what `json` reads
(NaN, 1e400, a lone surrogate). So text with 19 digits in a row (it may hold such an integer; a
hash in a string also sets it off) and anything orjson refuses are left to `json`: every value
reads as it would have.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

# 2**63 has 19 digits: a shorter run of digits is an integer orjson reads exactly.
_MAYBE_BEYOND_64_BITS = re.compile(r"[0-9]{19}")
# In bytes, a run of digits is found at C speed as a run of zeros once every digit is one (a
# regular expression took 140 ms over a 16 MB plan; this takes a tenth of that).
_DIGITS_AS_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_NINETEEN_DIGITS = b"0" * 19


class _NotExact:
    def __repr__(self) -> str:
        return "NOT_EXACT"


NOT_EXACT: Final = _NotExact()


def may_hold_wide_integer(text: str | bytes) -> bool:
    """Whether `text` has 19 digits in a row, as an integer beyond 64 bits has."""
    if isinstance(text, str):
        return _MAYBE_BEYOND_64_BITS.search(text) is not None
    return _NINETEEN_DIGITS in text.translate(_DIGITS_AS_ZEROS)


def read_exactly(text: str | bytes) -> Any:
    """`text` as orjson reads it, or NOT_EXACT where `json` must read it (it may read another
    value, or refuse it, or accept what orjson refuses)."""
    if may_hold_wide_integer(text):
        return NOT_EXACT
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return NOT_EXACT
