"""A log's times: each stored chunk records when the server received it, and GraphQL's LogChunk
says where in its text each chunk's part starts and when it came (the log viewer's per-line time),
for the whole log and for one step's, from any offset."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx

from conftest import Tenant, make_stack
from firstlume.services.context import Context
from support.runs import start
from test_graphql_api import claim_one, data

LOG = """query($id: ID!, $step: String, $from: Int!) { organization(slug: "acme") { run(id: $id) {
  log(step: $step, fromOffset: $from) { text nextOffset times { index at } } } } }"""


async def test_each_part_of_a_log_says_when_it_arrived(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, "acme", "net", "plan")
    before = datetime.now(UTC) - timedelta(seconds=1)
    executor = await claim_one(ctx, client)
    await executor.step("checkout", "running")
    await executor.log("checkout", "Cloning\nChecked out\n")
    await executor.step("checkout", "done")
    await executor.step("init", "running")
    await executor.log("init", "Initializing")
    await executor.log("init", " the backend...\nDone\n")
    after = datetime.now(UTC) + timedelta(seconds=1)

    whole = (await data(client, tenant, LOG, id=run_id, step=None, **{"from": 0}))["organization"]["run"][
        "log"
    ]
    assert whole["text"] == "Cloning\nChecked out\nInitializing the backend...\nDone\n"
    times = whole["times"]
    assert times[0]["index"] == 0
    assert {t["index"] for t in times} <= {
        0,
        len("Cloning\nChecked out\n"),
        len("Cloning\nChecked out\nInitializing"),
    }
    stamps = [datetime.fromisoformat(t["at"]) for t in times]
    assert all(before <= s <= after for s in stamps) and stamps == sorted(stamps)

    # One step's log, from the middle of its first chunk: indices are into the text returned.
    init = (
        await data(client, tenant, LOG, id=run_id, step="init", **{"from": len("Cloning\nChecked out\nIn")})
    )["organization"]["run"]["log"]
    assert init["text"] == "itializing the backend...\nDone\n"
    assert init["times"][0]["index"] == 0
    assert all(0 <= t["index"] < len(init["text"]) for t in init["times"])
