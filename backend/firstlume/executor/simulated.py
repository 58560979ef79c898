"""Simulated executors, for load tests (FIRSTLUME_LAUNCHER=simulated, launchers/simulated.py).

A simulated phase speaks the executor protocol exactly as `firstlume executor` does, through the
executor's own client and shippers (client.py, logs.py, reports.py, resources.py, heartbeat.py):
spec, step reports, log batches by offset, a plan upload with a generated `show -json` of N
`terraform_data` creates, resource states during the apply, heartbeats, and the result with the
log's tail and the last resource states. It runs no Terraform and clones nothing, so the control
plane does all of its real work and the machine spends little on the executors' side.

One process runs many phases, each an asyncio task with its own HTTP client (token): a Python
process per phase costs ~40 MB and ~0.4 s of CPU to start, which for 1,000 concurrent phases on a
2-core machine would be 40 GB and minutes of CPU before the first request.

Each phase writes what it sent (every log line and each resource's states, in order) to
`<record dir>/<run>-<phase>-<attempt>.json`, so a benchmark can check that nothing was lost,
doubled or reordered. The process reads launches, one JSON object a line, on stdin, and writes one
JSON line on stdout as each phase ends: `{"run_id", "phase", "attempt", "exit_code"}`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firstlume.domain.runs import APPLY_STEP, Phase, PhaseResult, ResourceState, StepStatus
from firstlume.executor.client import ControlPlaneError, ExecutorClient, Unauthorized
from firstlume.executor.heartbeat import Heartbeat
from firstlume.executor.logs import LogShipper, Masker
from firstlume.executor.phase import SHIP_INTERVAL_SECONDS
from firstlume.executor.reports import OrderedReports
from firstlume.executor.resources import ResourceShipper
from firstlume.protocol.executor import (
    CommitEntry,
    LogBatch,
    PhaseSpec,
    PlanUpload,
    ResourceReport,
    StepEntry,
)

# The environment the launcher gives the simulator process (settings FIRSTLUME_SIMULATED_*).
RESOURCES_VAR = "FIRSTLUME_SIMULATED_RESOURCES"
LOG_LINES_VAR = "FIRSTLUME_SIMULATED_LOG_LINES"
LINES_PER_SECOND_VAR = "FIRSTLUME_SIMULATED_LINES_PER_SECOND"
RECORD_DIR_VAR = "FIRSTLUME_SIMULATED_RECORD_DIR"

# How often the simulated engine writes its next lines (seconds): as Terraform's output arrives.
TICK_SECONDS = 0.1
# A line of about the length of Terraform's apply output.
LINE_WIDTH = 80
PLAN_LINES = 3
FAKE_COMMIT = "5" * 40


@dataclass(frozen=True)
class Workload:
    """What each simulated apply does: `resources` changes, `log_lines` lines at `lines_per_second`."""

    resources: int = 50
    log_lines: int = 2000
    lines_per_second: float = 100.0
    record_dir: Path | None = None

    @classmethod
    def from_env(cls, environ: dict[str, str] | os._Environ[str]) -> Workload:
        record = environ.get(RECORD_DIR_VAR)
        return cls(
            resources=int(environ.get(RESOURCES_VAR, cls.resources)),
            log_lines=int(environ.get(LOG_LINES_VAR, cls.log_lines)),
            lines_per_second=float(environ.get(LINES_PER_SECOND_VAR, cls.lines_per_second)),
            record_dir=Path(record) if record else None,
        )


def address(index: int) -> str:
    return f"terraform_data.r[{index}]"


def plan_json(resources: int) -> dict[str, Any]:
    """What `terraform show -json` prints for a plan that creates `resources` terraform_data."""
    return {
        "format_version": "1.2",
        "terraform_version": "1.11.0",
        "resource_changes": [
            {
                "address": address(i),
                "mode": "managed",
                "type": "terraform_data",
                "name": "r",
                "index": i,
                "provider_name": "terraform.io/builtin/terraform",
                "change": {
                    "actions": ["create"],
                    "before": None,
                    "after": {"input": f"value-{i}", "triggers_replace": None},
                    "after_unknown": {"id": True, "output": True},
                    "before_sensitive": False,
                    "after_sensitive": {},
                },
            }
            for i in range(resources)
        ],
    }


def line_text(run_id: str, phase: str, index: int) -> str:
    """Numbered, so that a reader can tell a lost, doubled or reordered line, and stamped with
    the wall clock (ms) when it was written, so that a reader can tell how long it took to come."""
    head = f"{run_id} {phase} {index:06d} {time.time() * 1000:.1f} "
    return head + "." * max(0, LINE_WIDTH - len(head))


@dataclass
class Record:
    """What one phase sent, in order."""

    run_id: str
    phase: str
    attempt: int
    lines: list[str] = field(default_factory=list)
    resources: dict[str, list[str]] = field(default_factory=dict)
    result: str | None = None
    error: str | None = None

    def write(self, directory: Path) -> None:
        # One file per executor that ran, even of the same phase: two would be a double launch.
        path = directory / f"{self.run_id}-{self.phase}-{self.attempt}-{uuid.uuid4().hex[:8]}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.__dict__))
        temporary.replace(path)


class SimulatedPhase:
    def __init__(self, client: ExecutorClient, told: dict[str, str], workload: Workload) -> None:
        self.client = client
        self.workload = workload
        self.record = Record(
            told["FIRSTLUME_RUN_ID"], told["FIRSTLUME_PHASE"], int(told["FIRSTLUME_ATTEMPT"])
        )
        self.logs = LogShipper(client, offset=0, masker=Masker(), interval=SHIP_INTERVAL_SECONDS)
        self.reports = OrderedReports(client, before_step_end=self.logs.flush)

    def _line(self, step: str, index: int) -> None:
        text = line_text(self.record.run_id, self.record.phase, index)
        self.record.lines.append(text)
        self.logs.line(step, text)

    async def run(self) -> int:
        """0 succeeded, 1 failed and reported, 2 nothing could be reported (as `firstlume executor`)."""
        try:
            spec = await self.client.get_spec()
        except ControlPlaneError as error:
            self.record.error = str(error)
            return 2
        self.logs = LogShipper(
            self.client, offset=spec.log_offset, masker=Masker(), interval=SHIP_INTERVAL_SECONDS
        )
        self.reports = OrderedReports(self.client, before_step_end=self.logs.flush)
        heartbeat = Heartbeat(self.client, spec.heartbeat_interval_seconds)
        await self.logs.start()
        await heartbeat.start()
        resources: list[ResourceReport] = []
        try:
            if spec.phase == Phase.PLAN:
                last_step = await self._plan()
            else:
                last_step, resources = await self._apply(spec)
            await self.reports.stop()
            tail = await self.logs.stop_with_tail()
        except Unauthorized as error:
            self.record.error = str(error)
            return 2
        except ControlPlaneError as error:
            self.record.error = str(error)
            return await self._finish(PhaseResult.FAILED, str(error), None, None, [])
        finally:
            await heartbeat.stop()
        log = LogBatch(offset=tail.offset, step=tail.step, text=tail.text) if tail is not None else None
        return await self._finish(PhaseResult.SUCCEEDED, None, last_step, log, resources)

    async def _finish(
        self,
        status: PhaseResult,
        error: str | None,
        last_step: str | None,
        log: LogBatch | None,
        resources: list[ResourceReport],
    ) -> int:
        try:
            await self.client.finish(status, error, last_step=last_step, log=log, resources=resources)
        except ControlPlaneError as failure:
            self.record.error = str(failure)
            return 2
        self.record.result = status
        return 0 if status == PhaseResult.SUCCEEDED else 1

    async def _plan(self) -> str:
        for step in ("checkout", "init"):
            self.reports.send(StepEntry(kind="step", name=step, status=StepStatus.RUNNING))
            if step == "checkout":
                self.reports.send(
                    CommitEntry(kind="commit", sha=FAKE_COMMIT, author="sim", message="simulated", url=None)
                )
            self._line(step, len(self.record.lines))
            self.reports.send(StepEntry(kind="step", name=step, status=StepStatus.DONE))
        self.reports.send(StepEntry(kind="step", name="plan", status=StepStatus.RUNNING))
        for _ in range(PLAN_LINES):
            self._line("plan", len(self.record.lines))
        plan_file = json.dumps({"simulated": self.record.run_id}).encode()
        await self.client.upload_plan(
            PlanUpload(
                plan_file_b64=plan_file,
                plan_json=plan_json(self.workload.resources),
                lock_file=None,
                variables=[],
            )
        )
        return "plan"

    async def _apply(self, spec: PhaseSpec) -> tuple[str, list[ResourceReport]]:
        plan = await self.client.get_plan()
        if hashlib.sha256(plan.plan_file_b64).hexdigest() != plan.sha256.lower():
            raise ControlPlaneError("the plan file's SHA-256 does not match the recorded one")
        self.reports.send(StepEntry(kind="step", name=APPLY_STEP, status=StepStatus.RUNNING))
        shipper = ResourceShipper(self.client, interval=SHIP_INTERVAL_SECONDS)
        await shipper.start()
        addresses = [change.address for change in plan.changes]
        lines = self.workload.log_lines
        # Resource i starts at line i·L/N and is done half a share later: states interleave
        # with the log as they do in `terraform apply -json`.
        events: list[tuple[float, str, ResourceState]] = []
        for i, name in enumerate(addresses):
            share = lines / max(1, len(addresses))
            events += [
                (i * share, name, ResourceState.APPLYING),
                ((i + 0.5) * share, name, ResourceState.DONE),
            ]
        events.sort(key=lambda e: e[0])
        per_tick = max(1e-9, self.workload.lines_per_second * TICK_SECONDS)
        written, due, next_event = 0, 0.0, 0
        loop = asyncio.get_running_loop()
        next_tick = loop.time()
        while written < lines or next_event < len(events):
            due = min(float(lines), due + per_tick)
            while written < int(due):
                self._line(APPLY_STEP, written)
                written += 1
                while next_event < len(events) and events[next_event][0] <= written:
                    self._state(shipper, events[next_event][1], events[next_event][2])
                    next_event += 1
            if written >= lines:
                while next_event < len(events):
                    self._state(shipper, events[next_event][1], events[next_event][2])
                    next_event += 1
                break
            next_tick += TICK_SECONDS
            await asyncio.sleep(max(0.0, next_tick - loop.time()))
        return APPLY_STEP, await shipper.stop_with_rest()

    def _state(self, shipper: ResourceShipper, name: str, state: ResourceState) -> None:
        self.record.resources.setdefault(name, []).append(state)
        shipper.add(ResourceReport(address=name, state=state, error=None, stages=[]))


async def run_one(told: dict[str, str], workload: Workload) -> int:
    async with ExecutorClient(
        told["FIRSTLUME_CONTROL_PLANE_URL"], told["FIRSTLUME_EXECUTOR_TOKEN"]
    ) as client:
        phase = SimulatedPhase(client, told, workload)
        try:
            code = await phase.run()
        except Exception as error:  # a bug here must not take the other phases down
            phase.record.error = f"{type(error).__name__}: {error}"
            code = 2
        if workload.record_dir is not None:
            await asyncio.to_thread(phase.record.write, workload.record_dir)
        return code


async def serve(workload: Workload) -> int:
    """Runs every launch read on stdin until stdin closes and every phase has ended. A launcher
    that goes away (its control plane killed) closes stdin: the phases go on, as executors do
    when their replica dies, and reach the control plane through the URL they were given."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    running: set[asyncio.Task[None]] = set()

    async def one(told: dict[str, str]) -> None:
        code = await run_one(told, workload)
        ended = {
            "run_id": told["FIRSTLUME_RUN_ID"],
            "phase": told["FIRSTLUME_PHASE"],
            "attempt": int(told["FIRSTLUME_ATTEMPT"]),
            "exit_code": code,
        }
        try:
            sys.stdout.write(json.dumps(ended) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            pass  # the launcher is gone; the record says it all

    while line := await reader.readline():
        if not line.strip():
            continue
        task = asyncio.create_task(one(json.loads(line)))
        running.add(task)
        task.add_done_callback(running.discard)
    if running:
        await asyncio.wait(running)
    return 0


def main() -> int:
    workload = Workload.from_env(os.environ)
    if workload.record_dir is not None:
        workload.record_dir.mkdir(parents=True, exist_ok=True)
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(serve(workload))


if __name__ == "__main__":
    sys.exit(main())
