"""A request body is never read before its sender is authenticated, and never past its route's
cap (issue 16.7). Sent over raw sockets to the served control plane, so that a body can be
announced and never sent: an answer that arrives anyway was given without reading it."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

from conftest import LiveServer, Tenant

BIG = 500 * 1024 * 1024  # announced, never sent


def _request(
    server: LiveServer, head: str, body: bytes = b"", timeout: float = 5.0
) -> tuple[int, dict, float]:
    """Sends `head` and `body` (which may be far shorter than announced), then reads the answer:
    status, JSON body and the seconds it took."""
    address = urlsplit(server.url)
    started = time.monotonic()
    with socket.create_connection((address.hostname, address.port), timeout=timeout) as sock:
        sock.sendall(head.encode("latin-1") + body)
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    elapsed = time.monotonic() - started
    status_line, _, rest = data.partition(b"\r\n")
    payload = rest.split(b"\r\n\r\n", 1)[1]
    return int(status_line.split()[1]), json.loads(payload or b"{}"), elapsed


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def _head(method: str, path: str, length: int | None, token: str | None = None, chunked: bool = False) -> str:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    elif length is not None:
        lines.append(f"Content-Length: {length}")
    return "\r\n".join(lines) + "\r\n\r\n"


def test_an_unauthenticated_body_gets_401_without_being_read(server: LiveServer, tenant: Tenant) -> None:
    for token in (None, "fl_not-a-real-token"):
        status, body, elapsed = _request(
            server, _head("POST", "/api/v1/orgs/acme/stacks", BIG, token), b"{" + b" " * 65536
        )
        # 500 MB announced, 64 KB sent: the answer came without waiting for the rest.
        assert status == 401, body
        assert body["error"]["code"] == "unauthenticated"
        assert elapsed < 5


def test_an_unauthenticated_graphql_request_may_only_send_a_small_body(server: LiveServer) -> None:
    status, body, _ = _request(server, _head("POST", "/graphql", BIG), b"{" + b" " * 65536)
    assert status == 413 and body["error"]["code"] == "payload_too_large"
    # A small one is answered as before (GraphQL says who may see what).
    query = json.dumps({"query": "{ __typename }"}).encode()
    status, body, _ = _request(server, _head("POST", "/graphql", len(query)), query)
    assert status == 200 and body["data"] == {"__typename": "Query"}


def test_an_authenticated_body_over_the_cap_is_refused_unread(server: LiveServer, tenant: Tenant) -> None:
    cap = 4 * 1024 * 1024
    status, body, elapsed = _request(server, _head("POST", "/api/v1/orgs/acme/stacks", cap + 1, tenant.token))
    assert status == 413, body
    assert body["error"]["code"] == "payload_too_large" and str(cap) in body["error"]["message"]
    assert elapsed < 5


def test_a_chunked_body_is_cut_off_at_the_cap(server: LiveServer, tenant: Tenant) -> None:
    chunk = b"x" * (1024 * 1024)
    chunks = b"".join(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" for _ in range(6))
    status, body, _ = _request(
        server,
        _head("POST", "/api/v1/orgs/acme/stacks", None, tenant.token, chunked=True),
        chunks,
        timeout=15,
    )
    assert status == 413, body
    assert body["error"]["code"] == "payload_too_large"


def test_a_state_write_may_be_larger_than_a_json_body(server: LiveServer, tenant: Tenant) -> None:
    size = 5 * 1024 * 1024  # over the JSON cap, under the upload cap
    status, body, _ = _request(
        server,
        _head("POST", "/api/v1/orgs/acme/stacks/missing/state", size, tenant.token),
        b" " * size,
        timeout=15,
    )
    assert status != 413, body  # read, and answered by the route itself
