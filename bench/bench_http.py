"""P5: requests per second with 16 concurrent connections against the served control plane.

    .venv/bin/python bench/bench_http.py [postgresql|sqlite] [SECONDS of each slice, default 2]

GET a run, POST start-run (all to one stack, and spread over 16 stacks), and a GraphQL page of a
stack with 20 runs, beside the floor measured in the same run: an endpoint that only runs
`SELECT 1` through the same engine. Starts of one stack take turns on the stack's row lock (their
run numbers are the queue's order), so with one stack the figure is bounded by how long a start
holds that lock (its statements and its commit's flush to disk), and with 16 by the CPU. That endpoint
exists only in this benchmark's own app (`serve` below), never in the product. Uses `wrk` when it
is installed (apt-get install wrk), else httpx. Prints figures; never fails on a slow machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from served import context, database, environment, seed, served

CONNECTIONS = 16
ROUNDS = 3
SPREAD_STACKS = [f"load-{n}" for n in range(CONNECTIONS)]
STACK_PAGE = """query($slug: String!) { organization(slug: "bench") { stack(slug: $slug) {
  id slug name folder { path }
  runs(first: 20) { totalCount pageInfo { hasNextPage endCursor }
    nodes { id number type status awaitingApproval finished createdAt createdBy finishedAt queuePosition
            stack { id slug name } commit { sha message url } summary { text } } } } } }"""


def serve(port: int) -> None:
    """The product's app plus the floor endpoint, served by uvicorn (run in a subprocess) with the
    garbage collector settings of `firstlume serve`."""
    import uvicorn
    from sqlalchemy import text
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from firstlume.app import create_app
    from firstlume.cli import collect_as_served

    async def select_one(request: Request) -> Response:
        async with request.app.state.ctx.db.read() as session:
            one = await session.scalar(text("SELECT 1"))
        return JSONResponse({"one": one})

    app = create_app()
    app.router.routes.insert(0, Route("/bench/select-1", select_one))
    collect_as_served()  # as `firstlume serve` does
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def wrk(
    url: str,
    seconds: int,
    method: str = "GET",
    body: str | None = None,
    headers: dict[str, str] | None = None,
    paths: list[str] | None = None,
) -> tuple[float, int]:
    """Requests per second and the count of non-2xx answers; `paths` are taken in turn."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(f"wrk.method = {json.dumps(method)}\n")
        if body is not None:
            script.write(f"wrk.body = {json.dumps(body)}\n")
        for name, value in (headers or {}).items():
            script.write(f"wrk.headers[{json.dumps(name)}] = {json.dumps(value)}\n")
        if paths:
            listed = ", ".join(json.dumps(path) for path in paths)
            script.write(
                f"local paths = {{{listed}}}\nlocal next_path = 0\n"
                "request = function()\n  next_path = next_path % #paths + 1\n"
                "  return wrk.format(nil, paths[next_path])\nend\n"
            )
    try:
        output = subprocess.run(
            ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{seconds}s", "-s", script.name, url],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    finally:
        os.unlink(script.name)
    rate = float(re.search(r"Requests/sec:\s+([0-9.]+)", output)[1])  # type: ignore[index]
    bad = re.search(r"Non-2xx or 3xx responses:\s+([0-9]+)", output)
    return rate, int(bad[1]) if bad else 0


async def httpx_load(
    url: str,
    seconds: int,
    method: str = "GET",
    body: str | None = None,
    headers: dict[str, str] | None = None,
    paths: list[str] | None = None,
) -> tuple[float, int]:
    done = bad = 0
    deadline = time.perf_counter() + seconds
    origin = url.split("/", 3)
    targets = [f"{origin[0]}//{origin[2]}{path}" for path in paths] if paths else [url]

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal done, bad
        while time.perf_counter() < deadline:
            target = targets[done % len(targets)]
            response = await client.request(method, target, content=body, headers=headers)
            done += 1
            bad += response.status_code >= 300

    limits = httpx.Limits(max_connections=CONNECTIONS)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(CONNECTIONS)))
        return done / (time.perf_counter() - started), bad


async def load(url: str, seconds: int, **options: object) -> tuple[float, int]:
    if shutil.which("wrk"):
        return await asyncio.to_thread(wrk, url, seconds, **options)  # type: ignore[arg-type]
    return await httpx_load(url, seconds, **options)  # type: ignore[arg-type]


async def main(kind: str, seconds: int) -> None:
    async with database(kind) as url:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp)
            async with context(url, data) as ctx:
                tenant = await seed(ctx, stacks=("net", "load", *SPREAD_STACKS))
            command = [sys.executable, __file__, "serve"]
            with served(environment(url, data), command) as server:
                org = f"{server.url}/api/v1/orgs/bench"
                auth = {**tenant.headers, "Content-Type": "application/json"}
                async with httpx.AsyncClient(headers=auth, timeout=30) as api:
                    ids = [
                        (await api.post(f"{org}/stacks/net/runs", json={"type": "plan"})).json()["id"]
                        for _ in range(25)
                    ]
                run_url = f"{org}/runs/{ids[-1]}"  # queued behind 24 others: its position is worked out
                floor_url = f"{server.url}/bench/select-1"
                post: dict[str, object] = {"method": "POST", "body": '{"type": "plan"}', "headers": auth}
                measures: list[tuple[str, str, dict[str, object]]] = [
                    ("GET a run", run_url, {"headers": auth}),
                    ("POST start-run, one stack", f"{org}/stacks/load/runs", post),
                    ("POST start-run, 16 stacks", f"{org}/stacks/load/runs",
                        {**post, "paths": [f"/api/v1/orgs/bench/stacks/{slug}/runs" for slug in SPREAD_STACKS]}),
                    ("GraphQL a stack and 20 runs", f"{server.url}/graphql", {"method": "POST", "headers": auth,
                        "body": json.dumps({"query": STACK_PAGE, "variables": {"slug": "net"}})}),
                ]  # fmt: skip
                figures = []
                for what, target, options in measures:
                    # The floor in slices alternating with the measure's: a machine whose speed
                    # drifts within minutes (a shared host) moves both alike.
                    floors, rates, refused = [], [], 0
                    for _ in range(ROUNDS):
                        floors.append((await load(floor_url, seconds))[0])
                        rate, bad = await load(target, seconds, **options)
                        rates.append(rate)
                        refused += bad
                    figures.append((what, statistics.mean(rates), statistics.mean(floors), refused))
    tool = "wrk" if shutil.which("wrk") else "httpx"
    load_average = os.getloadavg()[0]
    print(
        f"P5 {CONNECTIONS} connections ({tool}), {kind}, {ROUNDS} slices of {seconds} s each alternating with"
        f" the floor's, {os.cpu_count()} cores, load {load_average:.1f}"
    )
    for what, rate, floor, bad in figures:
        note = f"  ({bad} refused)" if bad else ""
        print(
            f"  {what:<30} {rate:6.0f} req/s   floor (GET running SELECT 1) {floor:6.0f} req/s   {rate / floor:5.2f}×{note}"
        )


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["serve"]:
        serve(int(args[1]))
    else:
        asyncio.run(main(args[0] if args else "postgresql", int(args[1]) if len(args) > 1 else 2))
