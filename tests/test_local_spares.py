"""The local launcher's spare executors are started while no executor runs: starting one costs a
phase that runs meanwhile as much CPU time again on a small machine. A launch that takes the last
spare while executors run still starts one, so the next launch finds one."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from firstlume.launchers import local
from firstlume.launchers.base import ExecutorDied, PhaseLaunch
from firstlume.launchers.local import Isolation, LocalLauncher


class _Refuses(http.server.BaseHTTPRequestHandler):
    """A control plane that refuses every token once `answer` is set: an executor told of it
    runs until then, and then ends."""

    answer = threading.Event()

    def do_GET(self) -> None:
        self.answer.wait(60)
        body = b'{"error": {"code": "unauthenticated", "message": "test"}}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def refusing_url() -> Iterator[str]:
    _Refuses.answer.clear()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _Refuses.answer.set()
    server.shutdown()


async def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + 60
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def _phase(run_id: str, url: str) -> PhaseLaunch:
    return PhaseLaunch(
        run_id=run_id,
        phase="plan",
        attempt=1,
        token="refused",
        control_plane_url=url,
        org_slug="org",
        stack_slug="stack",
    )


async def test_spares_fill_up_only_while_no_executor_runs(tmp_path: Path, refusing_url: str) -> None:
    deaths: list[ExecutorDied] = []

    async def died(death: ExecutorDied) -> None:
        deaths.append(death)

    launcher = LocalLauncher(
        tmp_path / "logs", isolation=Isolation(work_root=tmp_path / "work", sandbox="off")
    )
    await launcher.start(died)
    try:
        spares = lambda: len(launcher._spares)  # noqa: E731
        starting = lambda: launcher._spare_starting is not None and not launcher._spare_starting.done()  # noqa: E731
        await _until(lambda: spares() == local.SPARES_IDLE and not starting(), "the spares to be started")

        # A run's two phases take a spare each, and no spare is started while they run.
        for run_id in ("plan", "apply"):
            await launcher.launch(_phase(run_id, refusing_url))
        assert spares() == local.SPARES_IDLE - 2 and not starting()

        # The launch that takes the last spare while executors run starts one.
        await launcher.launch(_phase("last", refusing_url))
        assert starting()

        # Once no executor runs, the spares fill up again.
        _Refuses.answer.set()
        await _until(lambda: len(deaths) == 3, "the three executors to end")
        await _until(lambda: spares() == local.SPARES_IDLE and not starting(), "the spares to fill up")
    finally:
        await launcher.close()
