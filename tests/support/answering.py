"""HTTP servers that give every GET one fixed answer, on a thread: a control plane that refuses
every executor token (an executor told of it ends at its first request), or a state backend
that has no state yet. Tests of how executors start and end use them instead of a whole
served control plane."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from support.http_threads import served_on_a_thread

REFUSAL = b'{"error": {"code": "unauthenticated", "message": "refused (test)"}}'


@contextlib.contextmanager
def answering(status: int, body: bytes = b"", *, hold: threading.Event | None = None) -> Iterator[str]:
    """The URL of a server answering every GET with `status` and `body` (JSON, when there is
    one). With `hold`, each answer waits until `hold` is set (or 60 s); leaving sets it."""

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if hold is not None:
                hold.wait(60)
            self.send_response(status)
            if body:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    with served_on_a_thread(server):
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            if hold is not None:
                hold.set()


def refusing_control_plane(hold: threading.Event | None = None) -> contextlib.AbstractContextManager[str]:
    """A control plane answering 401 to every executor request (see `answering` for `hold`)."""
    return answering(401, REFUSAL, hold=hold)
