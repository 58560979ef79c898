"""The reads behind the stacks list, the drift overview and the State tab, on both databases:
a stack's summary is its last apply's outcome and what awaits people (not its newest run), read in
a fixed number of statements for any number of stacks; the drift overview counts what drifted and
says it in words; a state version's resources and the diff of two versions name resources and
never a value."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy import select, update

from conftest import Tenant, make_stack
from firstlume.db.models import Organization, Run
from firstlume.domain.runs import RunStatus
from firstlume.services.context import Context
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads import summaries
from firstlume.services.reads.catalog import StackRecord
from support.runs import plan_run, start
from support.statements import StatementCounter

SECRET = "state-secret-7d1e"


async def gql(client: httpx.AsyncClient, tenant: Tenant, query: str, **variables: Any) -> dict[str, Any]:
    response = await client.post(
        "/graphql",
        json={"query": query, "variables": {"org": tenant.org, **variables}},
        headers=tenant.headers,
    )
    body = response.json()
    assert response.status_code == 200 and "errors" not in body, body
    return body["data"]  # type: ignore[no-any-return]


async def run_with_status(ctx: Context, tenant: Tenant, stack: str, run_type: str, status: RunStatus) -> str:
    """A run of `stack` put straight into `status`: these tests read runs, the lifecycle is
    test_run_lifecycle.py's."""
    run_id = await start(ctx, tenant.token, tenant.org, stack, run_type)
    async with ctx.db.transaction() as session:
        await session.execute(update(Run).where(Run.id == run_id).values(status=status.value))
    return run_id


STACKS = """
query($org: String!) { organization(slug: $org) { stacks { slug
  summary { lastApply { id status } awaitingApproval active drift }
} } }
"""


async def test_a_summary_is_the_last_apply_and_what_awaits_people_not_the_newest_run(
    ctx: Context, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    for slug in ("app", "fresh", "broken"):
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
    applied = await run_with_status(ctx, tenant, "app", "apply", RunStatus.APPLIED)
    await run_with_status(ctx, tenant, "app", "apply", RunStatus.AWAITING_APPROVAL)
    await run_with_status(ctx, tenant, "app", "plan", RunStatus.QUEUED)  # the newest run
    await run_with_status(ctx, tenant, "app", "drift", RunStatus.DRIFTED)
    await run_with_status(ctx, tenant, "app", "plan", RunStatus.PLANNED)  # a plan is not an apply
    await run_with_status(ctx, tenant, "broken", "apply", RunStatus.APPLIED)
    failed = await run_with_status(ctx, tenant, "broken", "destroy", RunStatus.FAILED)
    await run_with_status(ctx, tenant, "broken", "drift", RunStatus.NO_CHANGES)

    data = await gql(client, tenant, STACKS)
    by_slug = {s["slug"]: s["summary"] for s in data["organization"]["stacks"]}
    assert by_slug["app"] == {
        "lastApply": {"id": applied, "status": "APPLIED"},
        "awaitingApproval": 1,
        "active": 1,
        "drift": "DRIFTED",
    }
    assert by_slug["fresh"] == {"lastApply": None, "awaitingApproval": 0, "active": 0, "drift": "UNKNOWN"}
    assert by_slug["broken"]["lastApply"] == {"id": failed, "status": "FAILED"}
    assert by_slug["broken"]["drift"] == "IN_SYNC"

    async with ctx.db.read() as session:
        assert await summaries.stack_summaries(session, []) == []


async def test_summaries_of_many_stacks_cost_the_same_statements_as_of_two(
    ctx: Context, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    counter = StatementCounter(ctx.db)
    try:

        async def statements() -> int:
            async with ctx.db.read() as session:
                stack_ids = [s.id for s in await _stacks(session, tenant)]
                with counter.counting() as seen:
                    found = await summaries.stack_summaries(session, stack_ids)
            assert [s.stack_id for s in found] == stack_ids
            return len(seen)

        for slug in ("s00", "s01"):
            await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
            await run_with_status(ctx, tenant, slug, "apply", RunStatus.APPLIED)
        two = await statements()
        for n in range(2, 30):
            await make_stack(ctx, tenant, {"slug": f"s{n:02}", "repository": "file:///repo"})
            await run_with_status(ctx, tenant, f"s{n:02}", "apply", RunStatus.AWAITING_APPROVAL)
        assert await statements() == two == 3
    finally:
        counter.close()


async def _stacks(session: Any, tenant: Tenant) -> list[StackRecord]:
    org_id = await session.scalar(select(Organization.id).where(Organization.slug == tenant.org))
    [stacks] = await catalog_reads.stacks_of_orgs(session, [org_id])
    return stacks


DRIFT = """
query($org: String!) { organization(slug: $org) { drift {
  stackSlug driftedCount lastRun { id } drifted { address action finding }
  stack { slug settings { effective { driftSchedule { value } } } }
} } }
"""


async def test_the_drift_overview_counts_what_drifted_and_says_it_in_words(
    ctx: Context, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    schedule = """mutation($org: String!) { updateSettings(org: $org, stack: "net", input: {driftSchedule: "0 6 * * *"}) {
      __typename } }"""
    assert (await gql(client, tenant, schedule))["updateSettings"]["__typename"] == "Settings"
    await start(ctx, tenant.token, tenant.org, "net", "drift")
    plan = {
        "format_version": "1.2",
        "resource_changes": [
            {
                "address": f"terraform_data.{name}",
                "mode": "managed",
                "type": "terraform_data",
                "name": name,
                "change": {"actions": actions, "before": before, "after": after, "after_unknown": {}},
            }
            for name, actions, before, after in (
                ("gone", ["create"], None, {"input": "a"}),
                ("edited", ["update"], {"input": "a"}, {"input": "b"}),
            )
        ],
    }
    assert list((await plan_run(ctx, plan)).values()) == ["drifted"]
    [line] = (await gql(client, tenant, DRIFT))["organization"]["drift"]
    assert line["driftedCount"] == 2
    assert {d["address"]: d["finding"] for d in line["drifted"]} == {
        "terraform_data.gone": "Deleted outside Terraform",
        "terraform_data.edited": "Changed outside Terraform",
    }
    assert line["stack"] == {
        "slug": "net",
        "settings": {"effective": {"driftSchedule": {"value": "0 6 * * *"}}},
    }
    # The drift run's own change groups say the same, where a plan's say "Will be updated".
    groups = """query($org: String!, $id: ID!) { organization(slug: $org) { run(id: $id) {
      changes { groups { action title total } } } } }"""
    run = await gql(client, tenant, groups, id=line["lastRun"]["id"])
    titles = {g["action"]: g["title"] for g in run["organization"]["run"]["changes"]["groups"] if g["total"]}
    assert titles == {"CREATE": "Deleted outside Terraform", "UPDATE": "Changed outside Terraform"}


def state_doc(serial: int, resources: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {
            "version": 4,
            "terraform_version": "1.11.4",
            "serial": serial,
            "lineage": "lineage-a",
            "outputs": {"token": {"value": SECRET, "type": "string", "sensitive": True}},
            "resources": resources,
        }
    ).encode()


def resource(name: str, *inputs: str, module: str = "", provider: str = "hashicorp/aws") -> dict[str, Any]:
    many = len(inputs) > 1
    return {
        "mode": "managed",
        **({"module": module} if module else {}),
        "type": "aws_thing",
        "name": name,
        "provider": f'provider["registry.terraform.io/{provider}"]',
        "instances": [
            {**({"index_key": i} if many else {}), "attributes": {"input": value, "secret": SECRET}}
            for i, value in enumerate(inputs)
        ],
    }


STATE = """
query($org: String!, $first: Int!, $offset: Int!, $search: String, $from: Int!, $to: Int!) {
  organization(slug: $org) { stack(slug: "app") { state {
    resources(first: $first, offset: $offset, search: $search) {
      serial totalCount offset nodes { address type provider }
    }
    diff(fromSerial: $from, toSerial: $to) {
      addedCount removedCount changedCount
      added { address } removed { address } changed { address }
    }
  } } }
}
"""


async def test_state_resources_page_and_two_versions_diff_by_name_without_values(
    ctx: Context, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    await make_stack(ctx, tenant, {"slug": "app", "repository": "file:///repo"})
    base = f"/api/v1/orgs/{tenant.org}/stacks/app/state"
    first = [resource("kept", "a"), resource("edited", "a"), resource("dropped", "a")]
    second = [
        resource("kept", "a"),
        resource("edited", "b"),
        resource("many", "x", "y", module="module.net"),
        {"mode": "data", "type": "aws_ami", "name": "ami", "instances": [{"attributes": {}}]},
    ]
    for serial, resources in ((1, first), (2, second)):
        answer = await client.post(base, content=state_doc(serial, resources), headers=tenant.headers)
        assert answer.status_code == 200, answer.text

    variables = {"first": 2, "offset": 0, "search": None, "from": 1, "to": 2}
    body = await client.post(
        "/graphql",
        json={"query": STATE, "variables": {"org": tenant.org, **variables}},
        headers=tenant.headers,
    )
    assert SECRET not in body.text
    state = body.json()["data"]["organization"]["stack"]["state"]
    assert state["resources"] == {
        "serial": 2,
        "totalCount": 4,
        "offset": 0,
        "nodes": [
            {"address": "aws_thing.edited", "type": "aws_thing", "provider": "hashicorp/aws"},
            {"address": "aws_thing.kept", "type": "aws_thing", "provider": "hashicorp/aws"},
        ],
    }
    assert state["diff"] == {
        "addedCount": 2,
        "removedCount": 1,
        "changedCount": 1,
        "added": [{"address": "module.net.aws_thing.many[0]"}, {"address": "module.net.aws_thing.many[1]"}],
        "removed": [{"address": "aws_thing.dropped"}],
        "changed": [{"address": "aws_thing.edited"}],
    }
    searched = await gql(client, tenant, STATE, **{**variables, "first": 10, "offset": 1, "search": "MANY"})
    page = searched["organization"]["stack"]["state"]["resources"]
    assert page["totalCount"] == 2 and [n["address"] for n in page["nodes"]] == [
        "module.net.aws_thing.many[1]"
    ]

    # A serial that is not there, or a negative offset, is refused in words.
    for bad, words in (
        ({"from": 7}, "No state version with serial 7."),
        ({"offset": -1}, "'offset' must be 0"),
    ):
        answer = await client.post(
            "/graphql",
            json={"query": STATE, "variables": {"org": tenant.org, **variables, **bad}},
            headers=tenant.headers,
        )
        assert answer.status_code == 200
        assert words in answer.json()["errors"][0]["message"]


async def test_a_state_of_10000_resources_is_read_a_page_at_a_time(
    ctx: Context, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    await make_stack(ctx, tenant, {"slug": "app", "repository": "file:///repo"})
    base = f"/api/v1/orgs/{tenant.org}/stacks/app/state"
    many = [resource(f"r{n:05}", "a") for n in range(10_000)]
    answer = await client.post(base, content=state_doc(1, many), headers=tenant.headers)
    assert answer.status_code == 200, answer.text
    page = """query($org: String!) { organization(slug: $org) { stack(slug: "app") { state {
      resources(first: 100, offset: 9950) { totalCount nodes { address } } } } } }"""
    found = (await gql(client, tenant, page))["organization"]["stack"]["state"]["resources"]
    assert found["totalCount"] == 10_000
    assert [n["address"] for n in found["nodes"]] == [f"aws_thing.r{n:05}" for n in range(9950, 10_000)]
