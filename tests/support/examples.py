"""How many examples the property tests and fuzzers draw.

`make test` (and CI) draws each test's full count. `make test-fast`, the inner loop, sets
FIRSTLUME_TEST_EXAMPLES=quick and draws a tenth (at least 20): the same tests and the same
strategies, run long enough to catch a broken route or a wrong round trip in seconds, while the
full suite keeps the depth that finds the rare input.
"""

from __future__ import annotations

import os

QUICK = os.environ.get("FIRSTLUME_TEST_EXAMPLES", "full") == "quick"


def examples(full: int) -> int:
    """`full` in the whole suite; a tenth of it, at least 20, in the inner loop."""
    return max(full // 10, min(full, 20)) if QUICK else full
