"""A served control plane answers its health check at once while the most expensive allowed query runs."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx

from conftest import LiveServer, Tenant
from firstlume.api.graphql.cost import MAX_COST
from firstlume.api.graphql.schema import MAX_ALIASES
from firstlume.services.context import Context
from test_graphql_cost import seed_runs
from test_graphql_query_cost import cost_of

RUN_FIELDS = "id number status type createdAt createdBy commit { sha } summary { text } steps { name status }"


def most_expensive_allowed() -> str:
    """100 runs, each with its stack's 100 runs and as many of their fields as the limit allows
    (more copies of `approval` under aliases, within the alias limit)."""

    def query(copies: int) -> str:
        fields = RUN_FIELDS + "".join(
            f" a{i}: approval {{ required approvedBy acknowledged }}" for i in range(copies)
        )
        return (
            'query { organization(slug: "acme") { stack(slug: "big") { runs(first: 100) { nodes { id '
            f"stack {{ runs(first: 100) {{ nodes {{ {fields} }} }} }} }} }} }} }} }}"
        )

    copies = 0
    while copies < MAX_ALIASES and cost_of(query(copies + 1)) <= MAX_COST:
        copies += 1
    return query(copies)


async def test_healthz_answers_within_200ms_while_the_most_expensive_allowed_query_runs(
    server: LiveServer, ctx: Context, tenant: Tenant
) -> None:
    await seed_runs(ctx, tenant, "big", 100)
    query = most_expensive_allowed()
    cost = cost_of(query)
    assert 0.6 * MAX_COST < cost <= MAX_COST, cost
    result: dict[str, Any] = {}

    def expensive() -> None:
        started = time.monotonic()
        response = httpx.post(
            server.url + "/graphql", json={"query": query}, headers=tenant.headers, timeout=300
        )
        result.update(response=response, seconds=time.monotonic() - started)

    worker = threading.Thread(target=expensive)
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        await client.get("/healthz")  # a connection of its own, opened before the query starts
        worker.start()
        while worker.is_alive():
            started = time.monotonic()
            await client.get("/healthz")
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(0.05)
    worker.join()
    response = result["response"]
    assert response.status_code == 200, response.text[:500]
    nodes = response.json()["data"]["organization"]["stack"]["runs"]["nodes"]
    assert len(nodes) == 100 and all(len(n["stack"]["runs"]["nodes"]) == 100 for n in nodes)
    print(f"\nquery of cost {cost}: {result['seconds']:.1f}s, {len(response.content) / 1e6:.1f} MB; "
          f"{len(latencies)} /healthz, slowest {max(latencies) * 1000:.0f} ms")  # fmt: skip
    assert len(latencies) >= 5
    # Nine in ten within 200 ms, and none waits for the query: the slowest under 500 ms or a
    # third of the query's own time, whichever is more. The query's lists give the event loop up
    # every 10 ms of work (api/graphql/pacing.py); what is left over that is the machine's: on
    # the suite's busy two cores the odd probe waits for the OS to run the process or for a
    # collection (200-250 ms usually; once 1.24 s in a fresh-clone run of the whole suite).
    # Before the pacing, every probe waited for the whole query (1.7-3.8 s alone), which fails
    # both bounds.
    ordered = sorted(latencies)
    assert ordered[int(len(ordered) * 0.9) - 1] < 0.2, ordered[-5:]
    assert ordered[-1] < max(0.5, result["seconds"] / 3), (ordered[-5:], result["seconds"])
