"""P3: a plan of 10,000 resources through the served control plane: upload (changes computed and
stored), REST changes (every change), a GraphQL page of 50 changes with the counts, approve.

    .venv/bin/python bench/bench_reads.py [postgresql|sqlite] [RESOURCES]

The floor, measured in the same run: `json.loads` of the plan's JSON text, under the garbage
collector settings of a serving process (`firstlume.cli.collect_as_served`), timed right before
each upload: the machine's load moves both sides alike (as in bench_apply.py), and the median of
the floors is printed beside the median of the uploads (each a run of its own). Reads print the
best of a few tries. Never fails on a slow machine.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from bench_changes import synthetic_plan
from served import context, database, environment, seed, served

from firstlume.cli import collect_as_served
from firstlume.services import dispatch

UPLOADS = 5
PAGE = """query($id: ID!) { organization(slug: "bench") { run(id: $id) {
  summary { text }
  changes(first: 50) {
    totalCount counts { delete replace update create total }
    pageInfo { hasNextPage endCursor }
    groups { action title count total }
    nodes { address type unit action state error replacedBecause stages { action state }
            attributes { name before after forcesReplacement } } } } } }"""


async def best(tries: int, action: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    fastest, result = float("inf"), None
    for _ in range(tries):
        started = time.perf_counter()
        result = await action()
        fastest = min(fastest, time.perf_counter() - started)
    return fastest, result


def timed(function: Callable[[str], Any], argument: str) -> float:
    started = time.perf_counter()
    function(argument)
    return time.perf_counter() - started


def line(what: str, seconds: float, floor: float, note: str = "") -> None:
    print(f"  {what:<34} {seconds * 1000:9.1f} ms  {seconds / floor:6.2f}× floor  {note}")


async def main(kind: str, resources: int) -> None:
    plan = {"format_version": "1.2", **synthetic_plan(resources)}
    plan_text = json.dumps(plan)
    # As the control plane parses: its collector settings make json.loads 2.5× faster here.
    collect_as_served()
    timed(json.loads, plan_text)  # the first read pays for a cold heap: not counted
    floors: list[float] = []
    async with database(kind) as url:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp)
            async with context(url, data) as ctx:
                tenant = await seed(ctx)
            with served(environment(url, data)) as server:
                api = httpx.AsyncClient(base_url=server.url, headers=tenant.headers, timeout=300)
                org = "/api/v1/orgs/bench"
                upload_body = json.dumps({"plan_file_b64": "cGxhbg==", "plan_json": plan, "variables": []})
                # A run takes one plan: each try is a run of its own, and the last one is read.
                uploads = []
                for _ in range(UPLOADS):
                    run_id = (await api.post(f"{org}/stacks/net/runs", json={"type": "apply"})).json()["id"]
                    async with context(url, data) as ctx:
                        [launch] = await dispatch.claim_plans(ctx)
                    executor = httpx.AsyncClient(
                        base_url=server.url, headers={"Authorization": f"Bearer {launch.token}"}, timeout=300
                    )
                    floors.append(timed(json.loads, plan_text))
                    started = time.perf_counter()
                    uploaded = await executor.post(
                        "/api/v1/executor/plan",
                        content=upload_body,
                        headers={"Content-Type": "application/json"},
                    )
                    uploads.append(time.perf_counter() - started)
                    assert uploaded.status_code == 200, uploaded.text[:500]
                    finished = await executor.post("/api/v1/executor/finish", json={"status": "succeeded"})
                    assert finished.json()["status"] == "awaiting_approval", finished.text[:500]
                    await executor.aclose()
                    if len(uploads) < UPLOADS:  # the next run queues behind this one otherwise
                        discarded = await api.post(f"{org}/runs/{run_id}/discard", json={})
                        assert discarded.status_code == 200, discarded.text[:500]
                upload, floor = statistics.median(uploads), statistics.median(floors)

                rest, response = await best(3, lambda: api.get(f"{org}/runs/{run_id}/changes"))
                changes = sum(g["count"] for g in response.json()["groups"])
                size = len(response.content) / 1e6
                page, response = await best(
                    5, lambda: api.post("/graphql", json={"query": PAGE, "variables": {"id": run_id}})
                )
                body = response.json()
                assert not body.get("errors"), body["errors"]
                nodes = len(body["data"]["organization"]["run"]["changes"]["nodes"])
                started = time.perf_counter()
                approved = await api.post(f"{org}/runs/{run_id}/approve", json={"acknowledged": []})
                approve = time.perf_counter() - started
                assert approved.json()["status"] == "apply_queued", approved.text[:500]
                await api.aclose()
    print(f"P3 a plan of {resources} resources ({changes} changes), {kind}, served")
    line(
        "floor: json.loads of the plan", floor, floor, f"({len(plan_text) / 1e6:.1f} MB, median of {UPLOADS})"
    )
    each = ", ".join(f"{u * 1000:.0f}" for u in uploads)
    line("upload + changes computed", upload, floor, f"(median of {UPLOADS}: {each} ms)")
    line("REST changes (all)", rest, floor, f"({size:.1f} MB)")
    line("GraphQL changes (page + counts)", page, floor, f"({nodes} changes on the page)")
    line("approve", approve, floor)


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(main(args[0] if args else "postgresql", int(args[1]) if len(args) > 1 else 10_000))
