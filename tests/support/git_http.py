"""A real Git server over smart HTTP for tests: `git http-backend` (CGI) behind an HTTP server,
with Basic auth when a token is given. Repositories are bare directories under `root`; pushes
go through receive-pack like on any host.

    server = GitHttpServer(tmp_path / "srv", token="t")   # or token=None for a public server
    with server.running():
        url = server.url("infra")                          # http://127.0.0.1:<port>/infra
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from support.http_threads import served_on_a_thread

HTTPS_TOKEN_USER = "x-access-token"


class _GitHttpBackend(BaseHTTPRequestHandler):
    server: GitHttpServer

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _serve(self) -> None:
        self.server.authorizations.append(self.headers.get("Authorization"))
        expected = self.server.expected_authorization
        if expected is not None and self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        self.server.requests.append(path)
        body = self._body()
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            # A user makes http-backend accept pushes (receive-pack).
            "REMOTE_USER": HTTPS_TOKEN_USER,
            "REMOTE_ADDR": "127.0.0.1",
        }
        output = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, check=True)
        head, _, payload = output.stdout.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.split(b"\r\n"):
            name, _, value = line.decode().partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunks = []
        while size := int(self.rfile.readline().strip(), 16):
            chunks.append(self.rfile.read(size))
            self.rfile.readline()
        self.rfile.readline()
        return b"".join(chunks)


class GitHttpServer(ThreadingHTTPServer):
    def __init__(self, root: Path, token: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _GitHttpBackend)
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.expected_authorization: str | None = None
        if token is not None:
            credentials = base64.b64encode(f"{HTTPS_TOKEN_USER}:{token}".encode()).decode()
            self.expected_authorization = f"Basic {credentials}"
        self.authorizations: list[str | None] = []
        self.requests: list[str] = []

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"

    @contextmanager
    def running(self) -> Iterator[GitHttpServer]:
        with served_on_a_thread(self):
            yield self
