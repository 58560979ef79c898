"""The dependency triggers' outbox carried out (services/dependencies/triggers.py), in process on
SQLite and PostgreSQL: a changed read output starts one run of the dependent, also when two
services (two control planes) carry out the same trigger at once; an unchanged one starts none."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import httpx
import pytest
from sqlalchemy import select, update

from conftest import Tenant, make_stack
from firstlume.db.engine import Database
from firstlume.db.models import Run, StateVersion
from firstlume.db.models_dependencies import DependencyTrigger
from firstlume.services.context import Context
from firstlume.services.dependencies.triggers import DependencyTriggers
from support.runs import start
from test_state_api import state_doc


async def write_state(client: httpx.AsyncClient, tenant: Tenant, serial: int, value: str) -> None:
    answer = await client.post(
        f"/api/v1/orgs/{tenant.org}/stacks/network/state",
        content=state_doc(serial, value=value),
        headers=tenant.headers,
    )
    assert answer.status_code == 200, answer.text


async def applied_network_run(ctx: Context, tenant: Tenant, planned: int, wrote: int) -> str:
    """A run of network that planned against serial `planned` and wrote serial `wrote`, with its
    pending trigger: what the applied transition leaves (the apply itself is the e2e tests')."""
    run_id = await start(ctx, tenant.token, tenant.org, "network", "apply")
    async with ctx.db.transaction() as session:
        await session.execute(
            update(Run).where(Run.id == run_id).values(planned_state_serials={".": planned})
        )
        await session.execute(update(StateVersion).where(StateVersion.serial == wrote).values(run_id=run_id))
        session.add(DependencyTrigger(upstream_run_id=run_id))
    return run_id


async def cluster_runs(ctx: Context, upstream_run: str) -> list[Run]:
    async with ctx.db.transaction() as session:
        return list(await session.scalars(select(Run).where(Run.trigger_upstream_run_id == upstream_run)))


async def pending(ctx: Context) -> int:
    async with ctx.db.transaction() as session:
        return len(
            list(await session.scalars(select(DependencyTrigger).where(DependencyTrigger.done_at.is_(None))))
        )


@pytest.fixture
async def chain(ctx: Context, tenant: Tenant, client: httpx.AsyncClient) -> Tenant:
    await make_stack(ctx, tenant, {"slug": "network", "repository": "file:///nowhere"})
    await make_stack(ctx, tenant, {"slug": "cluster", "repository": "file:///nowhere", "trigger": "apply"})
    body = {"depends_on": [{"stack": "network", "outputs": {"endpoint": "endpoint"}}]}
    answer = await client.put(
        f"/api/v1/orgs/{tenant.org}/stacks/cluster/dependencies", json=body, headers=tenant.headers
    )
    assert answer.status_code == 200, answer.text
    await write_state(client, tenant, 1, "one")
    return tenant


async def test_a_changed_output_starts_one_run_even_with_two_services_at_once(
    ctx: Context, client: httpx.AsyncClient, chain: Tenant
) -> None:
    await write_state(client, chain, 2, "two")
    upstream = await applied_network_run(ctx, chain, planned=1, wrote=2)
    # A second control plane: its own connections to the same database.
    other_db = Database(ctx.settings.database_url)
    try:
        first, second = DependencyTriggers(ctx), DependencyTriggers(replace(ctx, db=other_db))
        await asyncio.gather(first.run_pass(), second.run_pass())
    finally:
        await other_db.dispose()
    [run] = await cluster_runs(ctx, upstream)
    assert (
        run.type == "apply" and run.trigger_kind == "dependency" and run.trigger_actor == "dependency:network"
    )
    assert await pending(ctx) == 0
    async with ctx.db.transaction() as session:
        trigger = await session.get(DependencyTrigger, upstream)
        assert trigger is not None and trigger.result is not None
        assert trigger.result["started"] == [{"stack": "cluster", "run": run.id, "outputs": ["endpoint"]}]


async def test_an_apply_that_changes_no_read_output_starts_nothing(
    ctx: Context, client: httpx.AsyncClient, chain: Tenant
) -> None:
    # Serial 2 holds the same endpoint; only an output nobody reads could differ.
    await write_state(client, chain, 2, "one")
    upstream = await applied_network_run(ctx, chain, planned=1, wrote=2)
    assert await DependencyTriggers(ctx).carry_out_next() is True
    assert await cluster_runs(ctx, upstream) == []
    assert await pending(ctx) == 0
    assert await DependencyTriggers(ctx).carry_out_next() is False
