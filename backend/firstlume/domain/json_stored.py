"""JSON text the database gives back, read by orjson where it reads exactly what `json` would.

A page of 20 runs reads about 130 small JSON columns; `json.loads` was a twentieth of the page's
server time and orjson takes a fifth of that. orjson reads an integer beyond 64 bits as a float,
which would change a stored value, and refuses what `json` reads (NaN, 1e400, a lone surrogate):
text with 19 digits in a row (it may hold such an integer; a hash in a string also sets it off)
and anything orjson refuses are read by `json`, so every value reads as it did before.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# 2**63 has 19 digits: a shorter run of digits is an integer orjson reads exactly.
_MAYBE_BEYOND_64_BITS = re.compile(r"[0-9]{19}")


def loads(text: str | bytes) -> Any:
    if _MAYBE_BEYOND_64_BITS.search(text if isinstance(text, str) else text.decode()) is None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)
