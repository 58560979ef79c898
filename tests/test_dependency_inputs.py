"""What a dependent's plan reads (adoption-api.md, section 9), in process on SQLite and
PostgreSQL: the upstream's outputs as Terraform variables with their origin, a sensitive one as
sensitive, the serial read kept for a plan asked again, and a missing output failing the plan."""

from __future__ import annotations

import httpx
import pytest

from conftest import Tenant, make_stack
from firstlume.domain.dependencies import MissingUpstreamOutput
from firstlume.services import dispatch, phases
from firstlume.services.context import Context
from support.runs import start, status_of
from test_state_api import SECRET, state_doc


async def write_state(client: httpx.AsyncClient, tenant: Tenant, stack: str, serial: int, value: str) -> None:
    answer = await client.post(
        f"/api/v1/orgs/{tenant.org}/stacks/{stack}/state",
        content=state_doc(serial, value=value),
        headers=tenant.headers,
    )
    assert answer.status_code == 200, answer.text


async def depend(client: httpx.AsyncClient, tenant: Tenant, stack: str, outputs: dict[str, str]) -> None:
    body = {"depends_on": [{"stack": "network", "outputs": outputs}]}
    answer = await client.put(
        f"/api/v1/orgs/{tenant.org}/stacks/{stack}/dependencies", json=body, headers=tenant.headers
    )
    assert answer.status_code == 200, answer.text


@pytest.fixture
async def stacks(ctx: Context, tenant: Tenant) -> Tenant:
    for slug in ("network", "cluster", "app"):
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///nowhere"})
    return tenant


async def test_a_plan_reads_upstream_outputs_with_origin_and_keeps_the_serial_it_read(
    ctx: Context, client: httpx.AsyncClient, stacks: Tenant
) -> None:
    t = stacks
    await write_state(client, t, "network", 1, "one")
    await depend(client, t, "cluster", {"endpoint": "endpoint", "password": "db_password"})
    run_id = await start(ctx, t.token, t.org, "cluster", "plan")
    [launch] = await dispatch.claim_plans(ctx)
    spec = await phases.spec(ctx, launch.token)
    variables = {v.name: v for v in spec.variables}
    assert variables["endpoint"].value == "https://one"
    assert variables["endpoint"].origin == "output endpoint of stack network, state serial 1"
    assert variables["endpoint"].sensitive is False
    assert variables["db_password"].value == SECRET and variables["db_password"].sensitive is True
    assert variables["db_password"].origin == "output password of stack network, state serial 1"

    # The upstream moves on; the same plan asked for its spec again reads what it read first.
    await write_state(client, t, "network", 2, "two")
    again = {v.name: v for v in (await phases.spec(ctx, launch.token)).variables}
    assert again["endpoint"].value == "https://one"
    assert again["endpoint"].origin.endswith("state serial 1")
    assert await status_of(ctx, run_id) == "planning"


async def test_a_missing_upstream_output_fails_the_plan_with_that_reason(
    ctx: Context, client: httpx.AsyncClient, stacks: Tenant
) -> None:
    t = stacks
    await write_state(client, t, "network", 1, "one")
    await depend(client, t, "app", {"vpc_id": "vpc_id"})
    run_id = await start(ctx, t.token, t.org, "app", "plan")
    [launch] = await dispatch.claim_plans(ctx)
    with pytest.raises(MissingUpstreamOutput) as refused:
        await phases.spec(ctx, launch.token)
    reason = "This stack reads output 'vpc_id' of stack 'network', but its current state (serial 1) has no output 'vpc_id'"
    assert refused.value.message.startswith(reason)
    assert await status_of(ctx, run_id) == "failed"
    run = (await client.get(f"/api/v1/orgs/{t.org}/runs/{run_id}", headers=t.headers)).json()
    assert run["error"].startswith(reason)
