"""Fleet scale (issue 47): many stacks' applies at once, served by control-plane replicas on one
PostgreSQL, with watchers on every replica, measured beside floors taken in the same run.

    .venv/bin/python bench/fleet.py [--stacks=20] [--lines=100] [--rate=20] [--resources=10]
        [--watchers=40] [--idle-watchers=300] [--replicas=2] [--pubsub=postgres,redis] [--no-kill]
        [--json=PATH]
    issue 47's full scale: --stacks=1000 --lines=2000 --rate=10 --resources=50 --watchers=2000
        --idle-watchers=5000

Per pub/sub backend, on a fresh database: `--replicas` `firstlume serve` processes, schedulers on,
FIRSTLUME_LAUNCHER=simulated (executors that speak the real protocol without Terraform;
executor/simulated.py), executors reaching the replicas through one address (fleet_proxy.py, a
round-robin TCP proxy, as a Kubernetes Service). Four segments, each starting one apply run
(approval off) of every stack at once, with the replicas restarted for each workload:

1. phases only (no log lines, no resources): server CPU per phase launched and finished;
2. log lines only: server CPU per log line ingested (beyond segment 1's per-phase cost);
3. resources only: server CPU per resource-state report (idem);
4. the whole workload with watchers (runLog, resourceStates over both replicas, activeRuns) and,
   unless --no-kill, replica 0 killed with SIGKILL halfway: line → watcher latency, and the
   correctness counts (lost, duplicated, out of order, double launches, failed phases).

Then RSS per idle watcher on a surviving replica: with 0 and --idle-watchers idle activeRuns
watchers, beside the floor of as many bare (unsubscribed) connections.

Floors, same run: a bare HTTP request's server CPU (GET /healthz), the broker's own
publish → receive between two connections (with the executor's 0.1 s shipping interval, the least
a line can take to reach any watcher), a bare WebSocket connection's RSS. Server CPU is the
replicas' own user+system time (/proc), never the proxy's, the executors' or the bench's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from fleet_checks import Counts, compare_lines, compare_states, read_records, stored_states
from fleet_watchers import Watcher, watch, ws_url
from served import KEY, context, database, free_port, percentile, pg_url, seed
from websockets.asyncio.client import connect

from firstlume.protocol.events import LogAppended
from firstlume.pubsub import PubSub
from firstlume.services.logs import SAFETY_POLL_SECONDS

REDIS_URL = os.environ.get("FIRSTLUME_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
FINISHED = ("applied", "failed", "canceled", "planned", "no_changes", "errored")


@dataclass
class Config:
    stacks: int = 20
    lines: int = 100
    rate: float = 20.0
    resources: int = 10
    watchers: int = 40
    idle_watchers: int = 300
    replicas: int = 2
    pubsub: tuple[str, ...] = ("postgres", "redis")
    kill: bool = True
    cpu_segments: bool = True
    heartbeat_interval: float = 10.0

    @classmethod
    def from_argv(cls, argv: list[str]) -> Config:
        config = cls()
        for arg in argv:
            name, _, value = arg.removeprefix("--").partition("=")
            name = name.replace("-", "_")
            if name == "no_kill":
                config.kill = False
            elif name == "no_cpu_segments":
                config.cpu_segments = False
            elif name == "pubsub":
                config.pubsub = tuple(value.split(","))
            elif name == "json":
                continue
            elif hasattr(config, name):
                setattr(config, name, type(getattr(config, name))(value))
            else:
                raise SystemExit(f"unknown option {arg}\n{__doc__}")
        return config


@dataclass
class Segment:
    name: str
    runs: int = 0
    start_spread_s: float = 0.0
    duration_s: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    server_cpu_s: float = 0.0
    idle_cpu_per_s: float = 0.0
    lines: int = 0
    resource_reports: int = 0
    stored_lines: Counts = field(default_factory=Counts)
    watched_lines: Counts = field(default_factory=Counts)
    stored_states: Counts = field(default_factory=Counts)
    watched_states: Counts = field(default_factory=Counts)
    double_launches: int = 0
    relaunches: int = 0
    unreported: list[str] = field(default_factory=list)
    watchers: dict[str, int] = field(default_factory=dict)
    watcher_errors: list[str] = field(default_factory=list)
    latency_ms: dict[str, float] = field(default_factory=dict)
    killed_at_s: float | None = None
    refused_starts: list[str] = field(default_factory=list)
    killed_at_ms: float | None = None  # wall clock, to tell lines written before the kill


@dataclass
class Result:
    pubsub: str
    config: dict[str, Any]
    segments: list[Segment] = field(default_factory=list)
    healthz_cpu_ms: float = 0.0
    broker_ms: dict[str, float] = field(default_factory=dict)
    rss: dict[str, float] = field(default_factory=dict)
    per_phase_ms: float | None = None
    per_line_ms: float | None = None
    per_resource_report_ms: float | None = None


# -- processes ---------------------------------------------------------------------------------


@dataclass
class Replica:
    index: int
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0


def pubsub_url(kind: str, database_url: str) -> str:
    if kind == "redis":
        return REDIS_URL
    return "postgres://" + database_url.split("://", 1)[1]


@contextlib.contextmanager
def proxy(ports: list[int]) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("fleet_proxy.py")), str(port), *map(str, ports)],
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != b"ready":
            raise RuntimeError("the proxy did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


@contextlib.contextmanager
def replicas(
    config: Config, database_url: str, root: Path, ports: list[int], public_url: str, workload: dict[str, str]
) -> Iterator[list[Replica]]:
    started: list[Replica] = []
    try:
        for index, port in enumerate(ports):
            data = root / f"replica-{index}"
            env = {
                **os.environ,
                "FIRSTLUME_DATABASE_URL": database_url,
                "FIRSTLUME_DATA_DIR": str(data),
                "FIRSTLUME_ENCRYPTION_KEYS": KEY,
                "FIRSTLUME_SCHEDULER": "on",
                "FIRSTLUME_LAUNCHER": "simulated",
                "FIRSTLUME_PUBLIC_URL": public_url,
                "FIRSTLUME_PUBSUB_URL": pubsub_url(workload["pubsub"], database_url),
                "FIRSTLUME_SIMULATED_RECORD_DIR": workload["record_dir"],
                "FIRSTLUME_SIMULATED_RESOURCES": workload["resources"],
                "FIRSTLUME_SIMULATED_LOG_LINES": workload["lines"],
                "FIRSTLUME_SIMULATED_LINES_PER_SECOND": str(config.rate),
                "FIRSTLUME_EXECUTOR_HEARTBEAT_INTERVAL": str(config.heartbeat_interval),
                "FIRSTLUME_GIT_POLL_INTERVAL": "0",
            }
            data.mkdir(parents=True, exist_ok=True)
            with (root / f"replica-{index}.log").open("ab") as log:  # the child keeps its own copy
                process = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "firstlume",
                        "serve",
                        "--log-level",
                        "warning",
                        "--port",
                        str(port),
                    ],
                    env=env,
                    stdout=log,
                    stderr=log,
                )
            started.append(Replica(index, port, process))
        deadline = time.monotonic() + 120
        for replica in started:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(replica.url + "/readyz", timeout=2).status_code == 200:
                        break
                if replica.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"replica {replica.index} did not start; see {root}/replica-*.log")
                time.sleep(0.1)
        yield started
    finally:
        for replica in started:
            if replica.process.poll() is None:
                replica.process.terminate()
        for replica in started:
            try:
                replica.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                replica.process.kill()
                replica.process.wait()


# -- measuring ---------------------------------------------------------------------------------


async def idle_cpu_rate(servers: list[Replica], seconds: float = 3.0) -> float:
    before = sum(r.cpu_seconds() for r in servers)
    await asyncio.sleep(seconds)
    return (sum(r.cpu_seconds() for r in servers) - before) / seconds


async def healthz_cpu_ms(replica: Replica, requests: int = 300) -> float:
    """The floor of a request: server CPU of a bare GET /healthz, per request."""
    async with httpx.AsyncClient(base_url=replica.url, timeout=30) as http:
        await http.get("/healthz")
        before = replica.cpu_seconds()
        for _ in range(requests):
            await http.get("/healthz")
        return (replica.cpu_seconds() - before) * 1000 / requests


async def broker_round_trip(url: str, stop: asyncio.Event) -> list[float]:
    """The broker's own publish → receive between two connections, while the fleet runs."""
    listener, publisher = PubSub(url), PubSub(url)
    await listener.connect()
    await publisher.connect()
    times: list[float] = []
    try:
        async with listener.subscribe("run_fleet_probe") as events:
            n = 0
            while not stop.is_set():
                n += 1
                sent = time.perf_counter()
                await publisher.publish(
                    "run_fleet_probe", LogAppended(run_id="probe", step="x", offset=n, end=n)
                )
                while True:
                    event = await events.next(seconds=10)
                    if event is None or (isinstance(event, LogAppended) and event.offset == n):
                        break
                if event is not None:
                    times.append((time.perf_counter() - sent) * 1000)
                await asyncio.sleep(0.1)
    finally:
        await listener.disconnect()
        await publisher.disconnect()
    return times


async def start_runs(
    public_url: str, token: str, slugs: list[str], refused: list[str]
) -> tuple[list[str], float]:
    """One apply run of every stack, all at once; the run ids and the seconds from first to last.
    A start the control plane refuses is counted in `refused` (never retried: a POST that may have
    been stored is not sent again)."""
    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(
        base_url=public_url + "/api/v1/orgs/bench", headers={"Authorization": f"Bearer {token}"},
        timeout=120, limits=limits,
    ) as http:  # fmt: skip
        began = time.monotonic()

        async def one(slug: str) -> str | None:
            response = await http.post(f"/stacks/{slug}/runs", content='{"type": "apply"}')
            if response.status_code != 201:
                refused.append(f"{slug}: {response.status_code} {response.text[:300]}")
                return None
            return str(response.json()["id"])

        ids = await asyncio.gather(*(one(slug) for slug in slugs))
        return [i for i in ids if i is not None], time.monotonic() - began


async def statuses(conn: asyncpg.Connection, run_ids: list[str]) -> dict[str, int]:
    rows = await conn.fetch("SELECT status, count(*) FROM runs WHERE id = ANY($1) GROUP BY status", run_ids)
    return {row[0]: int(row[1]) for row in rows}


async def wait_finished(conn: asyncpg.Connection, run_ids: list[str], seconds: float) -> dict[str, int]:
    deadline = time.monotonic() + seconds
    while True:
        counts = await statuses(conn, run_ids)
        if sum(n for s, n in counts.items() if s in FINISHED) == len(run_ids) or time.monotonic() > deadline:
            return counts
        await asyncio.sleep(0.5)


async def stored_logs(conn: asyncpg.Connection, run_ids: list[str]) -> dict[str, str]:
    rows = await conn.fetch(
        'SELECT run_id, text FROM log_chunks WHERE run_id = ANY($1) ORDER BY run_id, "offset"', run_ids
    )
    logs: dict[str, list[str]] = {}
    for run_id, text in rows:
        logs.setdefault(run_id, []).append(text)
    return {run: "".join(parts) for run, parts in logs.items()}


def summarize(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 1),
        "p99": round(percentile(values, 0.99), 1),
        "max": round(max(values), 1),
    }


# -- one segment -------------------------------------------------------------------------------


async def segment(
    name: str,
    config: Config,
    root: Path,
    database_url: str,
    token: str,
    slugs: list[str],
    kind: str,
    *,
    lines: int,
    resources: int,
    with_watchers: bool,
    result: Result,
) -> Segment:
    seg = Segment(name)
    record_dir = root / f"records-{name}"
    record_dir.mkdir(parents=True)
    ports = [free_port() for _ in range(config.replicas)]
    workload = {
        "pubsub": kind,
        "record_dir": str(record_dir),
        "lines": str(lines),
        "resources": str(resources),
    }
    conn = await asyncpg.connect(pg_url(database_url.rsplit("/", 1)[1], driver="postgresql"))
    try:
        with (
            proxy(ports) as public_url,
            replicas(config, database_url, root / name, ports, public_url, workload) as servers,
        ):
            if not result.healthz_cpu_ms:
                result.healthz_cpu_ms = round(await healthz_cpu_ms(servers[0]), 3)
            seg.idle_cpu_per_s = await idle_cpu_rate(servers)
            cpu_before = {r.index: r.cpu_seconds() for r in servers}
            began = time.monotonic()
            run_ids, seg.start_spread_s = await start_runs(public_url, token, slugs, seg.refused_starts)
            seg.runs = len(run_ids)
            stop = asyncio.Event()
            alive = [True] * len(servers)
            urls = [r.url for r in servers]
            watchers: list[Watcher] = []
            tasks: list[asyncio.Task[None]] = []
            probe: asyncio.Task[list[float]] | None = None
            if with_watchers:
                for i in range(config.watchers):
                    watchers.append(Watcher("runLog", run_ids[i % len(run_ids)], replica=i % len(servers)))
                for i, run_id in enumerate(run_ids[: max(1, config.watchers // 2)]):
                    watchers.append(Watcher("resourceStates", run_id, replica=(i + 1) % len(servers)))
                for i in range(2 * len(servers)):
                    watchers.append(Watcher("activeRuns", None, replica=i % len(servers)))
                tasks = [asyncio.create_task(watch(w, urls, alive, token, stop)) for w in watchers]
                probe = asyncio.create_task(broker_round_trip(pubsub_url(kind, database_url), stop))
            expected = lines / config.rate + 30 + 0.5 * len(slugs)
            if with_watchers and config.kill and len(servers) > 1:
                # Once half of the runs apply, a third into their logs: every replica is busy with
                # phases and watchers.
                while (await statuses(conn, run_ids)).get("applying", 0) < len(run_ids) / 2:  # noqa: ASYNC110 (the database's state, not an event here)
                    await asyncio.sleep(0.2)
                await asyncio.sleep(lines / config.rate / 3)
                victim = servers[0]
                seg.killed_at_s = round(time.monotonic() - began, 1)
                seg.killed_at_ms = time.time() * 1000
                cpu_before.pop(
                    victim.index
                )  # its CPU dies with it: the per-unit figures come from segments 1-3
                os.kill(victim.process.pid, signal.SIGKILL)
                victim.process.wait()
                alive[victim.index] = False
            seg.statuses = await wait_finished(conn, run_ids, seconds=expected * 4 + 120)
            seg.duration_s = round(time.monotonic() - began, 1)
            seg.server_cpu_s = round(
                sum(r.cpu_seconds() - cpu_before[r.index] for r in servers if r.index in cpu_before), 2
            )
            if with_watchers:
                # runLog and resourceStates complete when their run ends; activeRuns never do.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        asyncio.gather(
                            *(t for t, w in zip(tasks, watchers, strict=True) if w.kind != "activeRuns")
                        ),
                        SAFETY_POLL_SECONDS + 30,
                    )
                await asyncio.sleep(
                    1
                )  # the last activeRuns message (no run active) comes after the last run ends
                stop.set()
                await asyncio.gather(*tasks, return_exceptions=True)
                assert probe is not None
                result.broker_ms = summarize(await probe)
            await check(seg, conn, run_ids, record_dir, watchers, resources, lines)
    finally:
        await conn.close()
    return seg


async def check(
    seg: Segment,
    conn: asyncpg.Connection,
    run_ids: list[str],
    record_dir: Path,
    watchers: list[Watcher],
    resources: int,
    lines: int,
) -> None:
    sent = read_records(record_dir)
    seg.unreported = sent.unreported[:10]
    seg.double_launches = sum(n - 1 for n in sent.executors.values() if n > 1)
    # phase_attempt counts a run's phases (its apply is attempt 2): a relaunch is a second attempt
    # of the same phase.
    attempts: dict[tuple[str, str], int] = {}
    for run, phase, _ in sent.executors:
        attempts[(run, phase)] = attempts.get((run, phase), 0) + 1
    seg.relaunches = sum(n - 1 for n in attempts.values())
    seg.lines = sum(len(v) for v in sent.lines.values())
    seg.resource_reports = sum(len(states) for run in sent.resources.values() for states in run.values())
    logs = await stored_logs(conn, run_ids)
    for run_id in run_ids:
        seg.stored_lines.add(compare_lines(sent.lines.get(run_id, []), logs.get(run_id, "")))
    rows = await conn.fetch(
        "SELECT run_id, address, state FROM resource_changes WHERE run_id = ANY($1)", run_ids
    )
    seg.stored_states = stored_states(list(rows), sent)
    latencies: dict[str, list[float]] = {}
    for w in watchers:
        seg.watchers[w.kind] = seg.watchers.get(w.kind, 0) + 1
        key = f"{w.kind} reconnected"
        seg.watchers[key] = seg.watchers.get(key, 0) + (1 if w.reconnects else 0)
        if w.error:
            seg.watcher_errors.append(f"{w.kind} {w.run_id}: {w.error}")
        if w.kind == "runLog":
            assert w.run_id is not None
            seg.watched_lines.add(compare_lines(sent.lines.get(w.run_id, []), "".join(w.text)))
            if not w.completed:
                seg.watcher_errors.append(f"runLog {w.run_id}: not completed")
            for written, received, replica in w.arrivals:
                # Lines written before the kill (or in a run without one) measure live delivery
                # with every replica up; those after it, one replica serving everything.
                when = (
                    "before the kill"
                    if seg.killed_at_ms is None or written < seg.killed_at_ms
                    else "after the kill"
                )
                latencies.setdefault(f"{when}, watchers on replica {replica}", []).append(received - written)
        elif w.kind == "resourceStates":
            assert w.run_id is not None
            seg.watched_states.add(compare_states(sent.resources.get(w.run_id, {}), w.states))
        elif w.last_active:
            seg.watcher_errors.append(f"activeRuns: still {len(w.last_active)} active at the end")
    before = [v for key, values in latencies.items() if key.startswith("before") for v in values]
    seg.latency_ms = {"before the kill, all watchers": summarize(before)} | {  # type: ignore[dict-item]
        key: summarize(values)  # type: ignore[misc]
        for key, values in sorted(latencies.items())
    }


# -- idle watchers' memory ---------------------------------------------------------------------


async def idle_memory(
    config: Config, root: Path, database_url: str, token: str, kind: str
) -> dict[str, float]:
    """RSS of one replica with 0 watchers, with N bare connections (acknowledged, nothing
    subscribed: the floor), and with N idle activeRuns subscriptions."""
    ports = [free_port()]
    workload = {"pubsub": kind, "record_dir": str(root / "records-idle"), "lines": "0", "resources": "0"}
    n = config.idle_watchers
    with (
        proxy(ports) as public_url,
        replicas(config, database_url, root / "idle", ports, public_url, workload) as servers,
    ):
        replica = servers[0]
        await asyncio.sleep(2)
        rss0 = replica.rss_kb()
        sockets: list[Any] = []
        try:
            for i in range(n):
                ws = await connect(
                    ws_url(replica.url), subprotocols=["graphql-transport-ws"], ping_interval=None
                )  # type: ignore[list-item]
                await ws.send(
                    json.dumps({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
                )
                await ws.recv()
                sockets.append(ws)
                if i % 500 == 499:
                    await asyncio.sleep(0)
            await asyncio.sleep(2)
            rss_bare = replica.rss_kb()
            query = "subscription($org: String!) { activeRuns(org: $org) { id } }"
            for ws in sockets:
                await ws.send(
                    json.dumps(
                        {
                            "id": "1",
                            "type": "subscribe",
                            "payload": {"query": query, "variables": {"org": "bench"}},
                        }
                    )
                )
            for ws in sockets:
                await ws.recv()  # the first message: the (empty) list of active runs
            await asyncio.sleep(2)
            rss_n = replica.rss_kb()
        finally:
            await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    return {
        "watchers": n,
        "rss_0_kb": rss0,
        "rss_bare_kb": rss_bare,
        "rss_n_kb": rss_n,
        "kb_per_bare_connection": round((rss_bare - rss0) / n, 1),
        "kb_per_idle_watcher": round((rss_n - rss0) / n, 1),
        "kb_per_subscription_beyond_connection": round((rss_n - rss_bare) / n, 1),
    }


# -- the whole ---------------------------------------------------------------------------------


async def fleet(config: Config, kind: str, root: Path) -> Result:
    result = Result(kind, asdict(config))
    slugs = [f"s{i:04d}" for i in range(config.stacks)]
    async with database("postgresql") as url:
        async with context(url, root / "seed") as ctx:
            tenant = await seed(ctx, stacks=tuple(slugs))
        # Approval off: each plan hands over to its apply in the same transaction.
        conn = await asyncpg.connect(pg_url(url.rsplit("/", 1)[1], driver="postgresql"))
        try:
            await conn.execute("UPDATE organizations SET require_approval = false")
        finally:
            await conn.close()
        plans = []
        if config.cpu_segments:
            # One resource at least: a plan without changes ends the run (no apply, no lines).
            plans += [
                ("phases", 0, 1, False),
                ("lines", config.lines, 1, False),
                ("resources", 0, max(1, config.resources), False),
            ]
        plans.append(("fleet", config.lines, config.resources, True))
        for name, lines, resources, watchers in plans:
            seg = await segment(
                name, config, root, url, tenant.token, slugs, kind,
                lines=lines, resources=resources, with_watchers=watchers, result=result,
            )  # fmt: skip
            result.segments.append(seg)
            report_segment(seg)
        if config.cpu_segments:
            by = {s.name: s for s in result.segments}

            def work_cpu(s: Segment) -> float:
                return s.server_cpu_s - s.idle_cpu_per_s * s.duration_s

            phases = 2 * by["phases"].runs
            per_phase = work_cpu(by["phases"]) / phases
            result.per_phase_ms = round(per_phase * 1000, 3)
            extra_lines = by["lines"].lines - by["phases"].lines
            if extra_lines:
                result.per_line_ms = round(
                    (work_cpu(by["lines"]) - work_cpu(by["phases"])) * 1000 / extra_lines, 4
                )
            extra_reports = by["resources"].resource_reports - by["phases"].resource_reports
            if extra_reports:
                result.per_resource_report_ms = round(
                    (work_cpu(by["resources"]) - work_cpu(by["phases"])) * 1000 / extra_reports, 4
                )
        if config.idle_watchers:
            result.rss = await idle_memory(config, root, url, tenant.token, kind)
    return result


def report_segment(seg: Segment) -> None:
    print(
        f"  [{seg.name}] {seg.runs} runs started in {seg.start_spread_s:.2f} s; finished in {seg.duration_s} s: {seg.statuses}"
    )
    print(
        f"      server CPU {seg.server_cpu_s} s (idle {seg.idle_cpu_per_s:.3f} s/s); {seg.lines} lines, {seg.resource_reports} resource reports sent"
    )
    print(f"      stored lines: {seg.stored_lines}; stored states: {seg.stored_states.lost} wrong")
    print(
        f"      double launches {seg.double_launches}, relaunched phases {seg.relaunches}, phases not succeeded {len(seg.unreported)}"
    )
    if seg.watchers:
        print(f"      watchers {seg.watchers}; killed replica 0 at {seg.killed_at_s} s")
        print(f"      watched lines: {seg.watched_lines}; watched states: {seg.watched_states}")
        print(f"      line → watcher ms: {seg.latency_ms}")
        for error in seg.watcher_errors[:5]:
            print(f"      watcher problem: {error}")
    for problem in seg.unreported[:5]:
        print(f"      not succeeded: {problem}")


def report(result: Result) -> None:
    print(f"== {result.pubsub}: floors and targets")
    print(f"  floor, bare GET /healthz: {result.healthz_cpu_ms} ms server CPU per request")
    print(f"  server CPU per phase launched and finished: {result.per_phase_ms} ms (target ≤ 5)")
    print(f"  server CPU per log line ingested: {result.per_line_ms} ms (target ≤ 0.05)")
    print(f"  server CPU per resource-state report: {result.per_resource_report_ms} ms (target ≤ 0.5)")
    print(
        f"  floor, broker publish → receive: {result.broker_ms} ms (+ the executor's 100 ms shipping interval)"
    )
    print(f"  idle watchers: {result.rss} (target ≤ 30 KB per idle watcher)")


async def main(argv: list[str]) -> list[Result]:
    config = Config.from_argv([a for a in argv if not a.startswith("--json")])
    print(f"fleet: {config}")
    results = []
    for kind in config.pubsub:
        # Kept when the bench fails: the replicas' logs say why.
        tmp = Path(tempfile.mkdtemp(prefix=f"fleet-{kind}-"))
        print(f"== pub/sub {kind} (replicas' logs in {tmp})")
        result = await fleet(config, kind, tmp)
        report(result)
        results.append(result)
        clean = all(set(seg.statuses) == {"applied"} and not seg.unreported for seg in result.segments)
        if clean:
            await asyncio.to_thread(shutil.rmtree, tmp, True)
        else:
            print(f"  (kept {tmp}: not every run applied)")
    return results


if __name__ == "__main__":
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        results = runner.run(main(sys.argv[1:]))
    out = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--json=")), None)
    if out:
        Path(out).write_text(json.dumps([asdict(r) for r in results], indent=2, default=str))
