"""Resource states travel in batches: the executor ships them in the background, in order, and
retries without loss; the control plane stores a batch with one statement whatever its size."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import event, select

from conftest import Tenant, make_stack
from firstlume.db.models import ResourceChange
from firstlume.executor.client import ExecutorClient, RequestRejected
from firstlume.executor.resources import ResourceShipper
from firstlume.protocol.executor import ResourceReport
from firstlume.services import accounts, dispatch, runs
from firstlume.services.commands import ApproveRun
from firstlume.services.context import Context
from support.runs import plan_run, report, start
from support.snapshot import snapshot

# -- the control plane stores a batch in one statement -------------------------------------------


def plan_of(creates: int, replaces: int) -> dict[str, Any]:
    def change(address: str, actions: list[str], before: Any, after: Any, **extra: Any) -> dict[str, Any]:
        return {
            "address": address, "mode": "managed", "type": "terraform_data", "name": address.split(".")[1],
            "change": {"actions": actions, "before": before, "after": after, "after_unknown": {},
                       "before_sensitive": {} if before else False, "after_sensitive": {} if after else False,
                       **extra},
        }  # fmt: skip

    return {
        "format_version": "1.2",
        "resource_changes": [change(f"terraform_data.c{i}", ["create"], None, {"input": i}) for i in range(creates)]
        + [
            change(f"terraform_data.r{i}", ["delete", "create"], {"input": 1}, {"input": 2}, replace_paths=[["input"]])
            for i in range(replaces)
        ],
    }  # fmt: skip


async def applying(ctx: Context, tenant: Tenant, creates: int, replaces: int = 0) -> tuple[str, str]:
    """A run in its apply phase with that many changes: (run id, the apply phase's token)."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, tenant.org, "net", "apply")
    assert await plan_run(ctx, plan_of(creates, replaces)) == {run_id: "awaiting_approval"}
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        acknowledged = [f"terraform_data.r{i}" for i in range(replaces)]
        await runs.approve_run(unit, actor, org, run_id, ApproveRun(acknowledged=acknowledged))
    [launch] = await dispatch.claim_applies(ctx)
    return run_id, launch.token


@contextmanager
def statements(ctx: Context) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(ctx.db.engine.sync_engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(ctx.db.engine.sync_engine, "before_cursor_execute", count)


async def states(ctx: Context, run_id: str) -> dict[str, tuple[str | None, str | None, list[Any]]]:
    async with ctx.db.transaction() as session:
        rows = await session.execute(
            select(ResourceChange.address, ResourceChange.state, ResourceChange.error, ResourceChange.stages)
            .where(ResourceChange.run_id == run_id)
        )  # fmt: skip
        return {address: (state, error, stages) for address, state, error, stages in rows}


async def test_a_batch_is_stored_with_the_same_statements_whatever_its_size(
    ctx: Context, tenant: Tenant
) -> None:
    run_id, token = await applying(ctx, tenant, creates=4000, replaces=2)
    small = {"updates": [{"address": "terraform_data.c0", "state": "applying"}]}
    big = {
        "updates": [{"address": f"terraform_data.c{i}", "state": "done"} for i in range(4000)]
        + [{"address": "terraform_data.r0", "state": "applying",
            "stages": [{"action": "delete", "state": "done"}, {"action": "create", "state": "applying"}]}]
    }  # fmt: skip

    with statements(ctx) as for_one:
        await report(ctx, token, "resources", small)
    with statements(ctx) as for_thousands:
        await report(ctx, token, "resources", big)

    assert len(for_thousands) == len(for_one)
    stored = await states(ctx, run_id)
    assert {stored[f"terraform_data.c{i}"][0] for i in range(4000)} == {"done"}
    assert stored["terraform_data.r0"][0] == "applying"
    assert stored["terraform_data.r0"][2] == [
        {"action": "delete", "state": "done"}, {"action": "create", "state": "applying"},
    ]  # fmt: skip
    # An update without stages leaves a replacement's stages as they were.
    assert stored["terraform_data.r1"][2] == [
        {"action": "delete", "state": "pending"}, {"action": "create", "state": "pending"},
    ]  # fmt: skip


async def test_within_a_batch_the_last_state_of_an_address_wins(ctx: Context, tenant: Tenant) -> None:
    run_id, token = await applying(ctx, tenant, creates=2)
    updates = [
        {"address": "terraform_data.c0", "state": "applying"},
        {"address": "terraform_data.c1", "state": "applying"},
        {"address": "terraform_data.c0", "state": "failed", "error": "boom"},
        {"address": "terraform_data.c1", "state": "done"},
        {"address": "terraform_data.unknown", "state": "done"},  # not in the plan: ignored
    ]

    await report(ctx, token, "resources", {"updates": updates})

    stored = await states(ctx, run_id)
    assert {a: s[:2] for a, s in stored.items()} == {
        "terraform_data.c0": ("failed", "boom"), "terraform_data.c1": ("done", None),
    }  # fmt: skip


async def test_an_applys_result_records_its_last_states_before_it(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    run_id, token = await applying(ctx, tenant, creates=2)
    headers = {"Authorization": f"Bearer {token}"}
    last = [
        {"address": "terraform_data.c0", "state": "done"},
        {"address": "terraform_data.c1", "state": "failed", "error": "boom"},
    ]

    # Resources failed, the run did not: the result counts the states it carries.
    response = await client.post(
        "/api/v1/executor/finish", headers=headers, json={"status": "failed", "resources": last}
    )

    assert response.status_code == 200 and response.json()["status"] == "failed"
    stored = await states(ctx, run_id)
    assert {a: s[:2] for a, s in stored.items()} == {
        "terraform_data.c0": ("done", None), "terraform_data.c1": ("failed", "boom"),
    }  # fmt: skip
    run = (await client.get(f"/api/v1/orgs/{tenant.org}/runs/{run_id}", headers=tenant.headers)).json()
    assert run["error"] is None
    assert run["failed_resources"] == {"count": 1, "addresses": ["terraform_data.c1"]}


async def test_a_plans_result_carrying_resource_states_is_refused_whole(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    await start(ctx, tenant.token, tenant.org, "net", "apply")
    [launch] = await dispatch.claim_plans(ctx)
    before = await snapshot(ctx)

    body = {"status": "failed", "error": "x", "resources": [{"address": "a", "state": "done"}]}
    response = await client.post(
        "/api/v1/executor/finish", headers={"Authorization": f"Bearer {launch.token}"}, json=body
    )

    assert response.status_code == 409 and "apply phase" in response.json()["error"]["message"]
    assert await snapshot(ctx) == before  # the run did not fail either


# -- the executor ships in the background, in order, without loss ---------------------------------


class ResourcesEndpoint:
    """`POST /resources` with the protocol's semantics (each state is absolute; the last wins),
    that fails in the ways a network fails, one fault per request, in order."""

    def __init__(self, faults: list[str] | None = None) -> None:
        self.faults = list(faults or [])
        self.batches: list[list[dict[str, Any]]] = []  # stored, in order
        self.answered: list[bool] = []  # whether the executor heard that each was stored
        self.history: dict[str, list[str]] = {}
        self.release = asyncio.Event()
        self.release.set()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        await self.release.wait()
        updates = json.loads(request.content)["updates"]
        fault = self.faults.pop(0) if self.faults else None
        if fault == "down":
            raise httpx.ConnectError("connection refused", request=request)
        if fault == "503":
            return httpx.Response(503, json={"error": {"code": "unavailable", "message": "down"}})
        if fault == "422":
            return httpx.Response(422, json={"error": {"code": "invalid_request", "message": "no"}})
        self.batches.append(updates)
        self.answered.append(fault != "lost_answer")
        for update in {u["address"]: u for u in updates}.values():  # the last one per address wins
            states = self.history.setdefault(update["address"], [])
            if not states or states[-1] != update["state"]:
                states.append(update["state"])
        if fault == "lost_answer":
            return httpx.Response(502, json={"error": {"code": "bad_gateway", "message": "lost"}})
        return httpx.Response(204)


def client_for(endpoint: ResourcesEndpoint) -> ExecutorClient:
    async def no_sleep(_: float) -> None:
        return None

    return ExecutorClient(
        "http://cp", "t", transport=httpx.MockTransport(endpoint.handle), max_attempts=3, sleep=no_sleep
    )


def lifecycle(address: str) -> list[ResourceReport]:
    return [ResourceReport(address=address, state=state) for state in ("applying", "done")]  # type: ignore[arg-type]


async def test_states_go_out_in_batches_in_order_and_survive_network_failures() -> None:
    endpoint = ResourcesEndpoint(faults=[None, "down", "503", "lost_answer", None, "down", "down", "down"])
    shipper = ResourceShipper(client_for(endpoint), interval=0.01, max_batch=7)
    await shipper.start()
    addresses = [f"terraform_data.r[{i}]" for i in range(50)]
    for address in addresses:
        for update in lifecycle(address):
            shipper.add(update)
        await asyncio.sleep(0)

    await shipper.stop()

    assert shipper.pending == 0
    assert all(len(batch) <= 7 for batch in endpoint.batches)
    # The batch whose answer was lost was sent again (the same states first); apart from that,
    # every state arrived once, in the order it happened, and each resource ended done.
    [lost] = [i for i, answered in enumerate(endpoint.answered) if not answered]
    assert endpoint.batches[lost + 1][: len(endpoint.batches[lost])] == endpoint.batches[lost]
    acknowledged = [b for b, answered in zip(endpoint.batches, endpoint.answered, strict=True) if answered]
    delivered = [(u["address"], u["state"]) for batch in acknowledged for u in batch]
    assert delivered == [(a, s) for a in addresses for s in ("applying", "done")]
    assert {address: states[-1] for address, states in endpoint.history.items()} == dict.fromkeys(
        addresses, "done"
    )


async def test_a_refused_batch_fails_the_flush_instead_of_vanishing() -> None:
    endpoint = ResourcesEndpoint(faults=["422"])
    shipper = ResourceShipper(client_for(endpoint), interval=10)
    shipper.add(ResourceReport(address="a", state="done"))  # type: ignore[arg-type]

    with pytest.raises(RequestRejected):
        await shipper.stop()


async def test_the_last_states_are_handed_to_the_result_unsent_when_they_fit_a_batch() -> None:
    endpoint = ResourcesEndpoint()
    shipper = ResourceShipper(client_for(endpoint), interval=10, max_batch=3)
    await shipper.start()
    for update in lifecycle("a"):
        shipper.add(update)

    rest = await shipper.stop_with_rest()

    assert [(u.address, u.state) for u in rest] == [("a", "applying"), ("a", "done")]
    assert endpoint.batches == [] and shipper.pending == 0

    more = ResourceShipper(client_for(endpoint), interval=10, max_batch=3)
    for address in ("b", "c"):
        for update in lifecycle(address):
            more.add(update)
    assert await more.stop_with_rest() == []  # four states: more than a batch, shipped here
    assert [len(batch) for batch in endpoint.batches] == [3, 1]
