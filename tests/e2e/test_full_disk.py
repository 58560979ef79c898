"""Storage that cannot write, under a served control plane with its scheduler and a real run:

- SQLite on a real tmpfs of a few MB (the embedded default's data dir), filled by other files and
  a run whose log takes the rest;
- PostgreSQL that accepts reads only (`default_transaction_read_only`, as a full tablespace or a
  standby answers).

Meanwhile every answer to REST reads and writes, GraphQL queries and an executor's reports is a
200 or a JSON 503 `storage_unavailable` with Retry-After (never a plain-text 500, never a dropped
connection), and /readyz says the storage is unavailable. The run caught in it ends `failed` with
a storage reason within the heartbeat timeout of the storage coming back, its stack's lock is
free (a new run plans), and nothing committed before is lost. No restart in between.

The tmpfs needs root (CI runs as root): without it the test fails, saying so; it never skips."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from conftest import (
    PG_SERVER,
    LiveServer,
    _sqlalchemy_pg_url,
    make_tenant,
    settings_env,
    start_live_server,
    stop_live_server,
)
from firstlume.db.engine import Database
from firstlume.keys import load_keyring
from firstlume.pubsub import PubSub
from firstlume.services.context import Context
from firstlume.settings import Settings
from support.e2e import Api
from support.git_repos import make_repo
from support.processes import executor_pids
from support.terraform import requires_terraform
from support.waiting import wait_until
from test_event_delivery import pg_database, terminate  # noqa: F401  (a fixture and a helper)

pytestmark = requires_terraform

DISK_SIZE = "6m"
HEARTBEAT_TIMEOUT = 4
# Requests of each kind while the storage cannot write, at the least.
REQUESTS_OF_EACH_KIND = 20
KINDS = (
    "rest read",
    "rest write",
    "graphql query",
    "executor heartbeat",
    "executor report",
    "executor log",
)
STORAGE_PREFIXES = ("storage full:", "storage read-only:", "storage unavailable:")

# The caught run: it writes its phase token where the test can use it (Terraform's http backend
# gets it, as the managed state's password, and the provisioner inherits it), prints about 3 MB
# (its log fills what the disk has left), then waits to be stopped.
CAUGHT = """
resource "terraform_data" "caught" {
  input = "c"
  provisioner "local-exec" {
    command = <<-EOT
      printf '%s' "$TF_HTTP_PASSWORD" > TOKEN_FILE
      i=0
      while [ $i -lt BURSTS ]; do
        head -c 100000 /dev/zero | tr '\\0' 'x' | fold -w 100
        i=$((i+1))
        sleep 0.05
      done
      echo burst-done
      sleep 600
    EOT
  }
}
"""
FINE = 'resource "terraform_data" "fine" { input = "f" }\n'


@dataclass
class Tally:
    """Answers by kind: status codes, and what was wrong with any."""

    statuses: dict[str, Counter[int]] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)
    resets: int = 0

    def ask(self, kind: str, send: Callable[[], httpx.Response]) -> None:
        try:
            response = send()
        except httpx.TransportError as error:  # a reset, a closed connection, a timeout
            self.resets += 1
            self.wrong.append(f"{kind}: {type(error).__name__}: {error}")
            return
        self.statuses.setdefault(kind, Counter())[response.status_code] += 1
        if response.status_code < 300:
            return
        try:
            body = response.json()
        except ValueError:
            self.wrong.append(f"{kind}: {response.status_code} not JSON: {response.text[:200]!r}")
            return
        error = body.get("error") or ((body.get("errors") or [{}])[0].get("extensions") or {})
        code = error.get("code")
        if response.status_code != 503 or code != "storage_unavailable":
            self.wrong.append(f"{kind}: {response.status_code} {body}")
        elif not response.headers.get("retry-after", "").isdigit():
            self.wrong.append(f"{kind}: 503 without Retry-After")

    def count(self, kind: str) -> int:
        return sum(self.statuses.get(kind, Counter()).values())


class Served:
    """The served control plane as a test drives it: the documented REST routes, GraphQL, the
    executor API with the caught phase's token, and /readyz."""

    def __init__(self, server: LiveServer, org: str, token: str) -> None:
        self.server = server
        self.api = Api(server.url, org, token)
        self.api.http.event_hooks = {"response": []}  # the tally checks every answer itself
        self.http = httpx.Client(base_url=server.url, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}"}
        self.o = f"/api/v1/orgs/{org}"
        self.org = org
        self.readers: list[dict[str, str]] = []
        # Variables whose change was answered 200 while the storage failed: they must be kept.
        self.stored: list[str] = []

    def new_tokens(self) -> None:
        """Tokens of the tenant's not used yet, for the reads while the storage fails: serving a
        read records its token's first use (a write), once a minute at most."""
        for i in range(REQUESTS_OF_EACH_KIND):
            response = self.http.post(f"{self.o}/tokens", json={"name": f"reads {i}"}, headers=self.headers)
            assert response.status_code == 201, response.text
            self.readers.append({"Authorization": f"Bearer {response.json()['token']}"})

    def close(self) -> None:
        self.api.close()
        self.http.close()

    def ready(self) -> httpx.Response:
        return self.http.get("/readyz")

    def requests(self, run_id: str, phase_token: str, round_: int) -> dict[str, Callable[[], httpx.Response]]:
        executor = {"Authorization": f"Bearer {phase_token}"}
        query = "query($o: String!, $id: ID!) { organization(slug: $o) { run(id: $id) { status } } }"
        return {
            "rest read": lambda: self.http.get(
                f"{self.o}/runs/{run_id}", headers=self.readers[round_ % len(self.readers)]
            ),
            "rest write": lambda: self.write(f"during{round_}"),
            "graphql query": lambda: self.http.post(
                "/graphql",
                json={"query": query, "variables": {"o": self.org, "id": run_id}},
                headers=self.headers,
            ),
            "executor heartbeat": lambda: self.http.post("/api/v1/executor/heartbeat", headers=executor),
            "executor report": lambda: self.http.post(
                "/api/v1/executor/reports",
                json={"reports": [{"kind": "step", "name": "apply", "status": "running"}]},
                headers=executor,
            ),
            "executor log": lambda: self.http.post(
                "/api/v1/executor/logs",
                json={"offset": self.log_end(executor), "step": "apply", "text": f"line {round_}\n"},
                headers=executor,
            ),
        }

    def write(self, name: str) -> httpx.Response:
        response = self.http.put(
            f"{self.o}/variables/{name}", json={"value": "y" * 20_000}, headers=self.headers
        )
        if response.status_code in (200, 201):
            self.stored.append(name)
        return response

    def log_end(self, executor: dict[str, str]) -> int:
        """Where the phase's stored log ends, as the control plane tells an executor that sent a
        batch past it (a read: it stores nothing)."""
        gap = self.http.post(
            "/api/v1/executor/logs", json={"offset": 10**12, "step": "apply", "text": "-"}, headers=executor
        )
        if gap.status_code == 503:
            return 0  # PostgreSQL refuses even the run's row lock: any batch is refused the same
        assert gap.status_code == 409, gap.text
        return int(gap.json()["error"]["expected_offset"])


def caught_stack(tmp_path: Path, bursts: int) -> tuple[str, Path]:
    token_file = tmp_path / "phase-token"
    main = CAUGHT.replace("TOKEN_FILE", str(token_file)).replace("BURSTS", str(bursts))
    url, _ = make_repo(tmp_path / "repo", {"infra/main.tf": main, "infra/fine.tf": FINE})
    return url, token_file


def committed_before(served: Served, tmp_path: Path, bursts: int) -> tuple[dict[str, Any], Path]:
    """A stack, its variables and a planned run: what must survive. Returns the planned run."""
    api = served.api
    url, token_file = caught_stack(tmp_path, bursts)
    response = api.http.post(f"{api.o}/stacks", json={"slug": "app", "repository": url, "path": "infra"})
    assert response.status_code == 201, response.text
    api.settings("", {"require_approval": False})
    for i in range(5):
        api.put_variable("", f"kept{i}", {"value": f"value {i}"})
    planned = api.wait(api.start("app", "plan"), "planned")
    served.new_tokens()
    return planned, token_file


def catch_a_run(served: Served, token_file: Path) -> tuple[str, str]:
    """Starts the apply whose log fills the storage; returns its id and its phase token."""
    run_id = served.api.start("app", "apply")
    token = wait_until(lambda: token_file.exists() and token_file.read_text(), 90, "the caught phase's token")
    return run_id, token


def storm(served: Served, run_id: str, phase_token: str, enough: Callable[[], bool], limit: float) -> Tally:
    """Requests of every kind, round after round, until `enough` says the storage has been failing
    long enough (and at least REQUESTS_OF_EACH_KIND rounds were made)."""
    tally = Tally()
    deadline = time.monotonic() + limit
    round_ = 0
    while round_ < REQUESTS_OF_EACH_KIND or not enough():
        assert time.monotonic() < deadline, f"the storage failure did not play out in {limit}s: {tally}"
        for kind, send in served.requests(run_id, phase_token, round_).items():
            tally.ask(kind, send)
        round_ += 1
    return tally


def check_storm(tally: Tally) -> None:
    assert tally.wrong == [], tally.wrong[:10]
    assert tally.resets == 0
    for kind in KINDS:
        assert tally.count(kind) >= REQUESTS_OF_EACH_KIND, tally.statuses
        assert set(tally.statuses[kind]) <= {200, 204, 503}, (kind, tally.statuses[kind])
    # The storage really refused (the odd small write may still find room), and reads were served.
    assert tally.statuses["rest write"][503] >= REQUESTS_OF_EACH_KIND * 3 // 4, tally.statuses["rest write"]
    assert tally.statuses["rest read"][200] >= REQUESTS_OF_EACH_KIND, tally.statuses["rest read"]
    assert tally.statuses["graphql query"][200] >= REQUESTS_OF_EACH_KIND, tally.statuses["graphql query"]
    # And the executor's log could not be stored.
    assert tally.statuses["executor log"][503] >= REQUESTS_OF_EACH_KIND * 3 // 4, tally.statuses[
        "executor log"
    ]


def refused(served: Served) -> bool:
    """Whether a change is refused for storage now."""
    api = served.api
    response = api.http.put(f"{api.o}/variables/probe", json={"value": "p" * 20_000})
    return response.status_code == 503


def unavailable(served: Served) -> bool:
    response = served.ready()
    return response.status_code == 503 and response.json().get("code") == "storage_unavailable"


def recovers(served: Served, run_id: str, storage_back_at: float, planned: dict[str, Any]) -> None:
    """After the storage came back, without a restart."""
    api = served.api
    # The caught run ends failed, storage named, within the heartbeat timeout.
    failed = wait_until(
        lambda: (run := api.run(run_id))["status"] in ("failed", "applied") and run,
        HEARTBEAT_TIMEOUT + 30,
        "the caught run to end",
        interval=0.1,
    )
    ended_after = time.monotonic() - storage_back_at
    assert failed["status"] == "failed", failed
    assert failed["error"].startswith(STORAGE_PREFIXES), failed["error"]
    assert ended_after <= HEARTBEAT_TIMEOUT, f"it ended {ended_after:.1f}s after the storage came back"
    assert wait_until(lambda: executor_pids(run_id) == [], 15, "the caught executor to be gone")
    # Writes work again, and the stack's lock is free: a new run plans.
    response = wait_until(
        lambda: (
            (r := api.http.put(f"{api.o}/variables/after", json={"value": "z"})).status_code in (200, 201)
            and r
        ),
        30,
        "a change to be stored again",
    )
    assert response.status_code in (200, 201)
    next_run = api.start("app", "plan")
    api.wait(next_run, "planned", timeout=90)
    wait_until(lambda: served.ready().status_code == 200, 30, "/readyz to say ready again")
    # Nothing committed before the storage failed is lost.
    names = {v["name"] for v in api.http.get(f"{api.o}/variables").json()["variables"]}
    assert {f"kept{i}" for i in range(5)} | {"after"} | set(served.stored) <= names, names
    again = api.run(planned["id"])
    assert (again["status"], again["number"]) == ("planned", planned["number"])
    # The caught run's log, as far as it was stored, is there.
    assert "x" * 100 in api.log(run_id)


def log_shows_the_burst(served: Served, run_id: str) -> bool:
    return "x" * 100 in served.api.log(run_id)


def server_log_is_clean(server: LiveServer) -> None:
    log = server.log()
    assert "Internal Server Error" not in log and "internal_error" not in log, log[-3000:]
    assert "unexpected error" not in log, log[-3000:]


# -- SQLite on a full tmpfs -----------------------------------------------------------------------


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_SIZE, unmounted at the end whatever happens."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.fail(
            "this test mounts a tmpfs (a real full disk) and so must run as root, as CI does; "
            f"it runs as uid {os.geteuid()}"
        )
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.fail(
            f"could not mount a tmpfs at {mount} (the full disk this test needs): {done.stderr.strip()}"
        )
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(disk: Path, leave: int) -> Path:
    """Other files take all of the disk but `leave` bytes."""
    stats = os.statvfs(disk)
    free = stats.f_bavail * stats.f_frsize
    filler = disk / "other-files"
    with filler.open("wb") as out:
        out.truncate(0)
        chunk = b"\0" * (1 << 20)
        remaining = max(free - leave, 0)
        while remaining > 0:
            out.write(chunk[: min(len(chunk), remaining)])
            remaining -= len(chunk)
    return filler


def _tenant(url: str, data_dir: Path) -> tuple[str, str]:
    settings = Settings.from_env(settings_env(url, data_dir, FIRSTLUME_SCHEDULER="off"))

    async def make() -> tuple[str, str]:
        db = Database(url)
        ctx = Context(settings=settings, db=db, keyring=load_keyring(settings), pubsub=PubSub("memory://"))
        tenant = await make_tenant(ctx, "acme", "ada@example.com")
        await db.dispose()
        return tenant.org, tenant.token

    return asyncio.run(make())


def serve(url: str, data_dir: Path, log_path: Path) -> LiveServer:
    env = settings_env(url, data_dir, FIRSTLUME_HEARTBEAT_TIMEOUT=str(HEARTBEAT_TIMEOUT))
    return start_live_server(env, log_path)


def test_a_full_disk_under_sqlite_answers_json_fails_the_caught_run_and_recovers(
    disk: Path, tmp_path: Path, sqlite_template: Path
) -> None:
    data_dir = disk / "data"
    data_dir.mkdir()
    db_file = data_dir / "firstlume.db"
    shutil.copy(sqlite_template, db_file)
    url = f"sqlite+aiosqlite:///{db_file}"
    org, token = _tenant(url, data_dir)
    server = serve(url, data_dir, tmp_path / "server.log")
    served = Served(server, org, token)
    try:
        planned, token_file = committed_before(served, tmp_path, bursts=30)
        filler = fill(disk, leave=1 << 20)
        run_id, phase_token = catch_a_run(served, token_file)
        wait_until(lambda: refused(served), 60, "the run's log to fill the disk")
        # Until the scheduler has stopped the caught executor: its heartbeats were not stored.
        tally = storm(
            served, run_id, phase_token, lambda: executor_pids(run_id) == [], HEARTBEAT_TIMEOUT + 60
        )
        check_storm(tally)
        # Kubernetes would stop routing to this replica.
        assert unavailable(served)

        filler.unlink()  # the operator frees space
        storage_back_at = time.monotonic()
        recovers(served, run_id, storage_back_at, planned)
        server_log_is_clean(server)
    finally:
        served.close()
        stop_live_server(server)
    with sqlite3.connect(db_file) as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# -- PostgreSQL that accepts reads only --------------------------------------------------------


async def only_reads(database: str, on: bool) -> None:
    """New sessions of `database` are read-only (on) or not: a database refusing writes, as a full
    tablespace or a standby does."""
    conn = await asyncpg.connect(PG_SERVER)
    try:
        await conn.execute(
            f'ALTER DATABASE "{database}" SET default_transaction_read_only = {"on" if on else "off"}'
        )
    finally:
        await conn.close()


def test_a_postgresql_that_only_reads_answers_json_fails_the_caught_run_and_recovers(
    pg_database: str, tmp_path: Path
) -> None:
    url = _sqlalchemy_pg_url(pg_database)
    data_dir = tmp_path / "data"
    org, token = _tenant(url, data_dir)
    server = serve(url, data_dir, tmp_path / "server.log")
    served = Served(server, org, token)
    try:
        planned, token_file = committed_before(served, tmp_path, bursts=2)
        run_id, phase_token = catch_a_run(served, token_file)
        wait_until(lambda: log_shows_the_burst(served, run_id), 30, "the caught run's log to be stored")
        asyncio.run(only_reads(pg_database, True))
        asyncio.run(terminate(pg_database))  # its sessions take the setting as they connect again
        wait_until(lambda: refused(served), 30, "changes to be refused")
        tally = storm(
            served, run_id, phase_token, lambda: executor_pids(run_id) == [], HEARTBEAT_TIMEOUT + 60
        )
        check_storm(tally)
        assert unavailable(served)

        asyncio.run(only_reads(pg_database, False))  # the operator makes it writable again
        storage_back_at = time.monotonic()
        recovers(served, run_id, storage_back_at, planned)
        assert api_error(served, run_id).startswith("storage read-only:")
        server_log_is_clean(server)
    finally:
        served.close()
        stop_live_server(server)


def api_error(served: Served, run_id: str) -> str:
    return str(served.api.run(run_id)["error"])
