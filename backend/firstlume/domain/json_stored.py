"""JSON text the database gives back, read by orjson where it reads exactly what `json` would
(domain/json_exact.py).

A page of 20 runs reads about 130 small JSON columns; `json.loads` was a twentieth of the page's
server time and orjson takes a fifth of that.
"""

from __future__ import annotations

import json
from typing import Any

from firstlume.domain.json_exact import NOT_EXACT, read_exactly


def loads(text: str | bytes) -> Any:
    value = read_exactly(text)
    return json.loads(text) if value is NOT_EXACT else value
