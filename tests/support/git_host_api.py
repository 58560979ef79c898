"""A stand-in for a Git host's REST API (the one part of a host that cannot run here), following
each host's published endpoints and response shapes for what Firstlume calls:
- GitHub (and Gitea/Forgejo, same paths): POST /repos/{owner}/{repo}/statuses/{sha} → 201 status;
  POST /repos/{owner}/{repo}/issues/{n}/comments → 201 {"id", "body"};
  PATCH /repos/{owner}/{repo}/issues/comments/{id} → 200 {"id", "body"}.
- GitLab: POST /projects/{id}/statuses/{sha} → 201; POST /projects/{id}/merge_requests/{iid}/notes
  → 201 {"id", "body"}; PUT /projects/{id}/merge_requests/{iid}/notes/{note_id} → 200.
Each call is recorded; `fail(n, status)` makes the next n calls answer `status`; a wrong token
gets 401 as the hosts answer it.

    with GitHostApi(kind="github", token="t").running() as host:
        host.api_url            # http://127.0.0.1:<port>/api/v3
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from support.http_threads import served_on_a_thread

PREFIXES = {"github": "/api/v3", "gitea": "/api/v1", "gitlab": "/api/v4"}


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # without the API prefix
    headers: dict[str, str]
    body: dict[str, Any]
    status: int


class _Handler(BaseHTTPRequestHandler):
    server: GitHostApi

    def do_POST(self) -> None:
        self.server.handle(self)

    def do_PATCH(self) -> None:
        self.server.handle(self)

    def do_PUT(self) -> None:
        self.server.handle(self)

    def log_message(self, format: str, *args: object) -> None:
        pass


class GitHostApi(ThreadingHTTPServer):
    def __init__(self, kind: str, token: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.kind, self.token = kind, token
        self.calls: list[Call] = []
        self.comments: dict[str, str] = {}
        self._failures: list[int] = []
        self._ids = itertools.count(1000)
        self._lock = threading.Lock()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{PREFIXES[self.kind]}"

    def fail(self, times: int, status: int = 500) -> None:
        with self._lock:
            self._failures += [status] * times

    def of(self, method: str, pattern: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method and re.search(pattern, c.path)]

    def _authorized(self, headers: dict[str, str]) -> bool:
        if self.kind == "gitlab":
            return headers.get("private-token") == self.token
        scheme = "Bearer" if self.kind == "github" else "token"
        return headers.get("authorization") == f"{scheme} {self.token}"

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length)
        body = json.loads(raw) if raw else {}
        headers = {k.lower(): v for k, v in handler.headers.items()}
        path = handler.path.split("?")[0].removeprefix(PREFIXES[self.kind])
        with self._lock:
            if not self._authorized(headers):
                status, answer = 401, {"message": "Bad credentials"}
            elif self._failures:
                status, answer = self._failures.pop(0), {"message": "Server Error"}
            else:
                status, answer = self._answer(handler.command, path, body)
            self.calls.append(Call(handler.command, path, headers, body, status))
        data = json.dumps(answer).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _answer(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if method == "POST" and re.search(r"/statuses/[0-9a-f]{40}$", path):
            return 201, {"id": next(self._ids), **body}
        if method == "POST" and re.search(r"/(issues/\d+/comments|merge_requests/\d+/notes)$", path):
            comment_id = str(next(self._ids))
            self.comments[comment_id] = body["body"]
            return 201, {"id": int(comment_id), "body": body["body"]}
        edited = re.search(r"/(?:issues/comments|merge_requests/\d+/notes)/(\d+)$", path)
        if method in ("PATCH", "PUT") and edited and edited[1] in self.comments:
            self.comments[edited[1]] = body["body"]
            return 200, {"id": int(edited[1]), "body": body["body"]}
        return 404, {"message": "Not Found"}

    @contextmanager
    def running(self) -> Iterator[GitHostApi]:
        with served_on_a_thread(self):
            yield self
