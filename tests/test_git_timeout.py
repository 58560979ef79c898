"""A Git server that accepts connections and never answers: the checkout gives up after
FIRSTLUME_GIT_TIMEOUT and the run fails with a reason naming the step, instead of staying
`planning` while heartbeats flow."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from firstlume.executor.checkout import CheckoutError, checkout
from support.git_repos import BY_BRANCH_OR_COMMIT, checkout_of


@pytest.fixture
def silent_git() -> Iterator[str]:
    """http://127.0.0.1:<port>/repo.git on a socket that accepts and never writes a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)  # kept open, never answered

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/repo.git"
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    listener.close()


@BY_BRANCH_OR_COMMIT
def test_checkout_gives_up_on_a_server_that_never_answers(
    silent_git: str, tmp_path: Path, by_commit: bool
) -> None:
    started = time.monotonic()
    with pytest.raises(CheckoutError) as refused:
        checkout(silent_git, tmp_path / "checkout", **checkout_of(by_commit), timeout=1.5)
    elapsed = time.monotonic() - started
    assert "checkout: cloning http://127.0.0.1" in str(refused.value)
    assert "no answer within 1.5 seconds (FIRSTLUME_GIT_TIMEOUT)" in str(refused.value)
    assert elapsed < 15, elapsed
