"""Young-generation collections held off while an uploaded plan is read and worked through.

Reading a plan of 10,000 resources and working out its changes makes some 400,000 objects that
the collector tracks, alive until the answer. At the served collector settings
(cli.collect_as_served) a young collection runs every 100,000 new objects and walks every young
object still alive: measured in the served bench, four such collections took 31 to 54 ms of each
upload, walking objects the upload was still using. While a deferral is held the threshold is
high enough that none runs; the plan's objects are freed by their reference counts when the
upload is done (so the deferral must end after they are dropped), and collections go on at the
served pace.

Deferrals may overlap (two uploads at once): the threshold comes back when the last one ends.
A young collection still runs past DEFERRED_THRESHOLD objects alive (enough for a plan of some
25,000 resources), so what other requests leave in cycles meanwhile stays bounded.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

DEFERRED_THRESHOLD = 2_000_000

_lock = threading.Lock()
_held = 0
_served: tuple[int, int, int] | None = None


@contextmanager
def young_collections_deferred() -> Iterator[None]:
    global _held, _served
    with _lock:
        if _held == 0:
            _served = gc.get_threshold()
            gc.set_threshold(DEFERRED_THRESHOLD, *_served[1:])
        _held += 1
    try:
        yield
    finally:
        with _lock:
            _held -= 1
            if _held == 0 and _served is not None:
                gc.set_threshold(*_served)
                _served = None
