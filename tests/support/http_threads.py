"""A standard-library HTTP server served on a thread, for a test's lifetime."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from socketserver import BaseServer

# serve_forever checks for shutdown() between waits of this many seconds: its default, 0.5,
# made every test that stops a server wait a quarter of a second on average, hundreds of times.
POLL_SECONDS = 0.01


@contextmanager
def served_on_a_thread(server: BaseServer) -> Iterator[None]:
    """Serves `server` until the block ends, then shuts it down and closes its socket."""
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True).start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
