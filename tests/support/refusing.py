"""A control plane that refuses every executor token: an executor told of it ends at its first
request. Tests of how executors start and end use it instead of a whole served control plane."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REFUSAL = b'{"error": {"code": "unauthenticated", "message": "refused (test)"}}'


@contextlib.contextmanager
def refusing_control_plane(hold: threading.Event | None = None) -> Iterator[str]:
    """Its URL. With `hold`, each answer waits until `hold` is set (or 60 s), so executors stay
    alive until then; leaving sets it."""

    class Refuse(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if hold is not None:
                hold.wait(60)
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(REFUSAL)))
            self.end_headers()
            self.wfile.write(REFUSAL)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        if hold is not None:
            hold.set()
        server.shutdown()
        server.server_close()
