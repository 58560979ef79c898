"""A real HTTP server that receives webhooks in tests: it records each request (headers, body)
and answers with the status codes it is told, in order (then 200)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from support.http_threads import served_on_a_thread


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def signed_with(self, secret: str) -> bool:
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers.get("x-firstlume-signature", ""), expected)


class Receiver:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answers: list[int] = []
        # While cleared, requests wait before they are answered (the test holds them).
        self.release = threading.Event()
        self.release.set()
        self.arrived = threading.Event()
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    def events(self) -> list[str]:
        with self._lock:
            return [r.json["event"] for r in self.received]

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length", "0"))
        body = handler.rfile.read(length)
        with self._lock:
            self.received.append(
                Received(handler.path, {k.lower(): v for k, v in handler.headers.items()}, body)
            )
            status = self.answers.pop(0) if self.answers else 200
        self.arrived.set()
        self.release.wait(60)
        handler.send_response(status)
        handler.send_header("Content-Length", "2")
        handler.end_headers()
        handler.wfile.write(b"ok")


@contextmanager
def webhook_receiver() -> Iterator[Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            receiver._handle(self)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.server = server
    with served_on_a_thread(server):
        try:
            yield receiver
        finally:
            receiver.release.set()
