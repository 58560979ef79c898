"""P1: an apply of N `terraform_data` resources through Firstlume versus raw Terraform.

    .venv/bin/python bench/bench_apply.py [postgresql|sqlite] [N ...] [--repeat=3] [--timeline] [--profile]
                                                       (default: postgresql 100 1000)

For each N, in the same run and on the same code:
- floor: `terraform init && terraform plan -out=plan && terraform apply plan` in a temp dir;
- Firstlume: POST an apply run (approval off) to a served control plane (uvicorn, its scheduler and
  local executors, as `firstlume serve` runs them), then poll GET run until it is `applied`.
Prints both and their ratio (--timeline: each step's start and end too). Also the executor's
start-up: from spawning `firstlume executor` to its first request, beside a bare `python -c pass`.
PostgreSQL uses the local server (user postgres, trust auth), in a database created and dropped here.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import pygit2

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
KEY = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="  # 32 bytes, benchmarks only
ORG = "bench"
USER = "bench@example.com"
TIMELINE = "--timeline" in sys.argv
# --profile: the control plane and its executors run under py-spy (pip install py-spy), which
# writes collapsed stacks to bench-apply-profile.txt in the current directory.
PROFILE = "--profile" in sys.argv
REPEAT = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--repeat=")), 3)


def main_tf(resources: int) -> str:
    return (
        f'resource "terraform_data" "r" {{\n  count = {resources}\n  input = "value-${{count.index}}"\n}}\n'
    )


def backend_tf(state_path: Path) -> str:
    return 'terraform {\n  backend "local" {\n    path = "' + state_path.as_posix() + '"\n  }\n}\n'


def terraform_env(root: Path) -> dict[str, str]:
    config = root / "terraform.rc"
    config.write_text("disable_checkpoint = true\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    env.update(TF_CLI_CONFIG_FILE=str(config), TF_IN_AUTOMATION="1", TF_INPUT="0", CHECKPOINT_DISABLE="1")
    return env


def floor(root: Path, resources: int) -> float:
    """Raw Terraform, the three commands Firstlume's two phases run at the least."""
    work = root / f"floor-{resources}-{uuid.uuid4().hex[:6]}"
    work.mkdir()
    (work / "main.tf").write_text(main_tf(resources))
    (work / "backend.tf").write_text(backend_tf(root / f"{work.name}.tfstate"))
    env = terraform_env(root)
    started = time.perf_counter()
    for args in (
        ["init", "-input=false", "-no-color"],
        ["plan", "-input=false", "-no-color", "-out=plan.tfplan"],
        ["apply", "-input=false", "-no-color", "plan.tfplan"],
    ):
        subprocess.run(["terraform", *args], cwd=work, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def make_repo(path: Path, files: dict[str, str]) -> str:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    repo = pygit2.init_repository(str(path), initial_head="main")
    repo.index.add_all()
    repo.index.write()
    signature = pygit2.Signature("Bench", USER)
    repo.create_commit("HEAD", signature, signature, "bench", repo.index.write_tree(), [])
    return path.resolve().as_uri()


def print_timeline(run: dict[str, object]) -> None:
    """Where the time went: each step's start and end, in seconds after the run was created."""
    from datetime import datetime

    created = datetime.fromisoformat(str(run["created_at"]))
    for step in run["steps"]:  # type: ignore[attr-defined]
        start, end = (
            (datetime.fromisoformat(step[k]) - created).total_seconds() if step[k] else float("nan")
            for k in ("started_at", "finished_at")
        )
        print(f"         {step['name']:<10} {start:7.2f} → {end:7.2f} s")
    finished = (datetime.fromisoformat(str(run["finished_at"])) - created).total_seconds()
    print(f"         {'applied':<10} {finished:7.2f} s")


def _cpu_seconds(pid: int) -> float:
    """CPU time used so far by `pid` and every live process below it (Linux /proc)."""
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, ValueError, IndexError):
            continue  # it ended meanwhile
    return total


def settle(pid: int, window: float = 0.1, busy: float = 0.01, quiet: int = 5, longest: float = 10.0) -> None:
    """Waits until the control plane and its children have been quiet (under `busy` CPU seconds
    in each `window`) for `quiet` windows in a row: what one measurement leaves behind (an
    executor exiting, then spare executors starting) must not land on the next, ours or the floor's."""
    deadline = time.monotonic() + longest
    used, calm = _cpu_seconds(pid), 0
    while calm < quiet and time.monotonic() < deadline:
        time.sleep(window)
        now = _cpu_seconds(pid)
        calm = calm + 1 if now - used < busy else 0
        used = now


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ControlPlane:
    def __init__(self, root: Path, database_url: str) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "FIRSTLUME_DATA_DIR": str(root / "data"),
            "FIRSTLUME_DATABASE_URL": database_url,
            "FIRSTLUME_ENCRYPTION_KEYS": KEY,
            "FIRSTLUME_PUBLIC_URL": self.url,
            "TF_CLI_CONFIG_FILE": str(root / "terraform.rc"),
        }
        firstlume = [sys.executable, "-m", "firstlume"]
        subprocess.run([*firstlume, "migrate"], env=self.env, check=True, capture_output=True)
        subprocess.run([*firstlume, "org", "create", ORG], env=self.env, check=True, capture_output=True)
        token = subprocess.run(
            [*firstlume, "token", "create", "--org", ORG, "--user", USER],
            env=self.env, check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        self.log = (root / "server.log").open("wb")
        profiler = ["py-spy", "record", "--subprocesses", "--format", "raw", "--rate", "200",
                    "-o", str(Path.cwd() / "bench-apply-profile.txt"), "--"] if PROFILE else []  # fmt: skip
        self.process = subprocess.Popen(
            [*profiler, *firstlume, "serve", "--port", str(self.port), "--log-level", "warning"],
            env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.http = httpx.Client(
            base_url=f"{self.url}/api/v1/orgs/{ORG}", headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
        deadline = time.monotonic() + 60
        while not self._ready():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("the control plane did not start; see " + str(root / "server.log"))
            time.sleep(0.1)
        self.http.patch("/settings", content=json.dumps({"require_approval": False})).raise_for_status()

    def _ready(self) -> bool:
        try:
            return httpx.get(self.url + "/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def apply(self, resources: int) -> float:
        slug = f"s{resources}-{uuid.uuid4().hex[:6]}"
        files = {"main.tf": main_tf(resources), "backend.tf": backend_tf(self.root / f"{slug}.tfstate")}
        url = make_repo(self.root / "repos" / slug, files)
        self.http.post("/stacks", content=json.dumps({"slug": slug, "repository": url})).raise_for_status()
        started = time.perf_counter()
        response = self.http.post(f"/stacks/{slug}/runs", content=json.dumps({"type": "apply"}))
        response.raise_for_status()
        run_id = response.json()["id"]
        # Following the log is one request that ends when the run does: no polling load on the
        # control plane, and the end is seen as soon as the control plane publishes it.
        with self.http.stream("GET", f"/runs/{run_id}/logs", params={"follow": "true"}) as follow:
            for _ in follow.iter_bytes():
                pass
        elapsed = time.perf_counter() - started
        run = self.http.get(f"/runs/{run_id}").json()
        if run["status"] != "applied":
            raise RuntimeError(f"the run ended {run['status']}: {run['error']}")
        if TIMELINE:
            print_timeline(run)
        return elapsed

    def stop(self) -> None:
        self.http.close()
        self.process.send_signal(signal.SIGINT)  # py-spy writes its profile when its child ends
        self.process.wait(timeout=60)
        self.log.close()


def executor_startup(samples: int = 7) -> tuple[float, float, float]:
    """Medians, in seconds: from spawning `firstlume executor` to its first request (answered
    401, so it stops there); from telling a waiting spare executor its phase to its first request
    (as the local launcher does); from spawning `python -c pass` to its exit."""
    arrived = threading.Event()

    class FirstRequest(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            arrived.set()
            body = b'{"error": {"code": "unauthenticated", "message": "bench"}}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FirstRequest)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    told = {
        "FIRSTLUME_CONTROL_PLANE_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "FIRSTLUME_EXECUTOR_TOKEN": "bench",
    }
    executor = [sys.executable, "-m", "firstlume", "executor"]
    cold, spare, bare = [], [], []
    for _ in range(samples):
        arrived.clear()
        started = time.perf_counter()
        process = subprocess.Popen(executor, env={**os.environ, **told}, stderr=subprocess.DEVNULL)
        arrived.wait(30)
        cold.append(time.perf_counter() - started)
        process.wait()

        waiting = subprocess.Popen([*executor, "--spare"], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
        time.sleep(2)  # long enough for its imports, as a spare has while no run needs it
        assert waiting.stdin is not None
        arrived.clear()
        started = time.perf_counter()
        with contextlib.suppress(BrokenPipeError):  # a version without spares has exited
            waiting.stdin.write(json.dumps(told).encode() + b"\n")
            waiting.stdin.close()
        while not arrived.wait(0.01) and waiting.poll() is None:
            pass
        if arrived.is_set():
            spare.append(time.perf_counter() - started)
        waiting.wait()

        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - started)
    server.shutdown()
    return statistics.median(cold), statistics.median(spare) if spare else math.nan, statistics.median(bare)


def main(dialect: str, sizes: list[int]) -> None:
    if shutil.which("terraform") is None:
        sys.exit("bench_apply needs `terraform` on PATH")
    cold, spare, bare = executor_startup()
    print(
        f"executor start-up to its first request: spawned {1000 * cold:4.0f} ms, spare told {1000 * spare:4.0f} ms"
        f"   (python -c pass {1000 * bare:3.0f} ms)"
    )
    root = Path(tempfile.mkdtemp(prefix="fl-bench-apply-"))
    terraform_env(root)  # writes the CLI config the control plane's executors use too
    pg_name = None
    if dialect == "postgresql":
        pg_name = f"fl_bench_{uuid.uuid4().hex[:8]}"
        subprocess.run(["psql", f"{PG_SERVER}/postgres", "-qc", f'CREATE DATABASE "{pg_name}"'], check=True)
        database_url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{pg_name}"
    else:
        database_url = f"sqlite+aiosqlite:///{root / 'bench.db'}"
    plane = ControlPlane(root, database_url)
    try:
        plane.apply(1)  # warm-up: the first run pays for imports and connections once
        print(f"P1 apply, {dialect}: POST run → applied, versus terraform init && plan -out && apply")
        for resources in sizes:
            # Alternated and repeated: the machine's load moves both sides alike; medians.
            raws, serveds = [], []
            for _ in range(REPEAT):
                settle(plane.process.pid)
                raws.append(floor(root, resources))
                settle(plane.process.pid)
                serveds.append(plane.apply(resources))
            raw, served = statistics.median(raws), statistics.median(serveds)
            print(
                f"{resources:>6} terraform_data   firstlume {served:7.2f} s   terraform {raw:7.2f} s"
                f"   ratio {served / raw:5.2f}x   (median of {REPEAT})"
            )
    finally:
        plane.stop()
        if pg_name:
            subprocess.run(
                ["psql", f"{PG_SERVER}/postgres", "-qc", f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)'],
                check=False,
            )
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    dialect = args[0] if args and not args[0].isdigit() else "postgresql"
    sizes = [int(a) for a in args if a.isdigit()] or [100, 1000]
    main(dialect, sizes)
