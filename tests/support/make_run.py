"""`make run` in the repository, as the README tells a new user to start: on a fresh data
directory and a free port, with the exports it prints parsed, and a shell that runs documented
commands with them."""

from __future__ import annotations

import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from conftest import free_port
from support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def make_run(
    data_dir: Path, *, scheduler: bool, tls: bool = False
) -> Iterator[tuple[dict[str, str], subprocess.Popen[str]]]:
    """Serves `make run` (`make run TLS=1` with `tls`); yields the exports it printed and the
    process. `scheduler` off: runs stay queued (no executor, no terraform)."""
    for tool in ("curl", "jq", "make"):
        if shutil.which(tool) is None:
            pytest.fail(f"`{tool}` is needed by this test (see README: Testing).")
    port = free_port()
    env = {
        **os.environ,
        "FIRSTLUME_DATA_DIR": str(data_dir),
        "FIRSTLUME_SCHEDULER": "on" if scheduler else "off",
        "PYTHON": sys.executable,
    }
    env.pop("FIRSTLUME_DATABASE_URL", None)
    env.pop("FIRSTLUME_ENCRYPTION_KEYS", None)
    process = subprocess.Popen(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(ROOT),
            "run",
            f"PORT={port}",
            f"VENV={Path(sys.executable).parent.parent}",
            *(["TLS=1"] if tls else []),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    try:
        exports: dict[str, str] = {}
        lines: list[str] = []
        for line in process.stdout:
            lines.append(line)
            match = re.match(r"^export (\w+)=(.*)$", line.strip())
            if match:
                exports[match.group(1)] = match.group(2)
            if "ST" in exports:
                break
        assert {"FIRSTLUME_TOKEN", "H", "O", "ST"} <= set(exports), "".join(lines)
        url = f"https://localhost:{port}" if tls else f"http://127.0.0.1:{port}"
        ca = exports.get("SSL_CERT_FILE") if tls else None
        wait_until(lambda: _ready(url, ca) or process.poll() is not None, 60, "make run to serve")
        assert process.poll() is None, "".join(lines) + process.stdout.read()
        yield exports, process
    finally:  # however it went: `make run` and what it started never outlive the test
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        process.stdout.close()


def _ready(url: str, ca: str | None = None) -> bool:
    try:
        verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca) if ca else True
        return httpx.get(url + "/readyz", timeout=2, verify=verify).status_code == 200
    except httpx.HTTPError:
        return False


def shell(exports: dict[str, str], command: str, timeout: float = 30, **variables: str) -> str:
    """`command` in bash with the exports (and `variables`) set, as a user pasting them would."""
    script = "\n".join(f"export {k}={v}" for k, v in exports.items())
    script += "".join(f"\nexport {k}={v}" for k, v in variables.items())
    result = subprocess.run(
        ["bash", "-c", script + "\n" + command], capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
