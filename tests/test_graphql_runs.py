"""What GraphQL says about runs so that no client copies a lifecycle rule: whether a run can be
approved or canceled, which run a queued one waits for and where it stands, how long it took
without its time in the queue; and a stack's history filtered by status and type."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import update

from conftest import Tenant, make_stack, make_tenant
from firstlume.api.graphql.types import catalog as catalog_types
from firstlume.db.models import Run
from firstlume.domain.runs import APPROVABLE, CANCELABLE, RunStatus
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.runs import plan_run, start
from support.statements import StatementCounter

RUNS = """query($first: Int!, $status: [RunStatus!], $type: [RunType!], $after: String) {
  organization(slug: "acme") { stack(slug: "net") {
    runs(first: $first, status: $status, type: $type, after: $after) {
      totalCount pageInfo { hasNextPage endCursor }
      nodes { number status type approvable cancelable queuePosition startedAt durationMs
              blockedBy { number status } }
    } } } }"""


async def runs_of(client: httpx.AsyncClient, tenant: Tenant, **variables: Any) -> dict[str, Any]:
    body = (
        await client.post(
            "/graphql", json={"query": RUNS, "variables": {"first": 20, **variables}}, headers=tenant.headers
        )
    ).json()
    assert not body.get("errors"), body["errors"]
    return body["data"]["organization"]["stack"]["runs"]  # type: ignore[no-any-return]


PLAN = {"format_version": "1.2", "resource_changes": [{
    "address": "terraform_data.a", "mode": "managed", "type": "terraform_data", "name": "a",
    "change": {"actions": ["create"], "before": None, "after": {"input": "a"}, "after_unknown": {},
               "before_sensitive": False, "after_sensitive": {}},
}]}  # fmt: skip


async def _one_holding_three_queued(ctx: Context, tenant: Tenant) -> None:
    """Stack `net`: run 1 (an apply) holds the lock, awaiting approval; runs 2–4 are queued."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    holder = await start(ctx, tenant.token, "acme", "net", "apply")
    for _ in range(3):
        await start(ctx, tenant.token, "acme", "net", "plan")
    assert await plan_run(ctx, PLAN) == {holder: "awaiting_approval"}


async def test_queued_runs_name_the_run_holding_the_lock_and_their_place(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await _one_holding_three_queued(ctx, tenant)
    after = await runs_of(client, tenant)
    assert [(n["number"], n["status"], n["queuePosition"], n["blockedBy"]) for n in after["nodes"]] == [
        (4, "QUEUED", 3, {"number": 1, "status": "AWAITING_APPROVAL"}),
        (3, "QUEUED", 2, {"number": 1, "status": "AWAITING_APPROVAL"}),
        (2, "QUEUED", 1, {"number": 1, "status": "AWAITING_APPROVAL"}),
        (1, "AWAITING_APPROVAL", None, None),
    ]  # fmt: skip
    # Whether a run can be approved or canceled comes from the lifecycle's own groups.
    for node in after["nodes"]:
        status = RunStatus(node["status"].lower())
        assert (node["approvable"], node["cancelable"]) == (status in APPROVABLE, status in CANCELABLE)
    assert [(n["approvable"], n["cancelable"]) for n in after["nodes"]] == [
        (False, True), (False, True), (False, True), (True, False),
    ]  # fmt: skip


async def test_before_queued_runs_the_first_is_next_and_blocked_by_no_one(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    for _ in range(3):
        await start(ctx, tenant.token, "acme", "net", "plan")
    nodes = (await runs_of(client, tenant))["nodes"]
    assert [(n["number"], n["queuePosition"], n["blockedBy"]) for n in nodes] == [
        (3, 3, None), (2, 2, None), (1, 1, None),
    ]  # fmt: skip


async def test_duration_starts_with_the_first_phase(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, "acme", "net", "plan")
    [queued] = (await runs_of(client, tenant))["nodes"]
    assert (queued["startedAt"], queued["durationMs"]) == (None, None)
    [launch] = await dispatch.claim_plans(ctx)
    steps = [{"name": "checkout", "status": "running"}, {"name": "checkout", "status": "done"}]
    for step in steps:
        response = await client.post(
            "/api/v1/executor/steps", json=step, headers={"Authorization": f"Bearer {launch.token}"}
        )
        assert response.status_code in (200, 204), response.text
    [running] = (await runs_of(client, tenant))["nodes"]
    assert running["startedAt"] is not None and running["durationMs"] is None
    async with ctx.unit() as unit:
        run = await unit.session.get(Run, run_id)
        assert run is not None
        # Queued for an hour before it started: the hour is not part of its duration.
        await unit.session.execute(
            update(Run).where(Run.id == run_id).values(created_at=run.created_at.replace(year=2000))
        )
    await client.post(
        "/api/v1/executor/finish",
        json={"status": "failed", "error": "boom"},
        headers={"Authorization": f"Bearer {launch.token}"},
    )
    [failed] = (await runs_of(client, tenant))["nodes"]
    assert failed["status"] == "FAILED" and 0 <= failed["durationMs"] < 60_000


async def test_stack_runs_are_filtered_by_status_and_type_and_counted(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    kinds = ["plan", "apply", "drift", "apply", "plan", "apply"]
    ids = [await start(ctx, tenant.token, "acme", "net", kind) for kind in kinds]
    async with ctx.unit() as unit:
        for run_id, status in zip(ids, ["failed", "applied", "drifted", "failed", "planned"], strict=False):
            await unit.session.execute(update(Run).where(Run.id == run_id).values(status=status))
    failed = await runs_of(client, tenant, status=["FAILED"])
    assert [n["number"] for n in failed["nodes"]] == [4, 1] and failed["totalCount"] == 2
    applies = await runs_of(client, tenant, type=["APPLY"])
    assert [n["number"] for n in applies["nodes"]] == [6, 4, 2] and applies["totalCount"] == 3
    both = await runs_of(client, tenant, status=["FAILED", "QUEUED"], type=["APPLY"])
    assert [n["number"] for n in both["nodes"]] == [6, 4] and both["totalCount"] == 2
    page = await runs_of(client, tenant, first=1, type=["APPLY"])
    assert [n["number"] for n in page["nodes"]] == [6] and page["pageInfo"]["hasNextPage"]
    rest = await runs_of(client, tenant, first=5, type=["APPLY"], after=page["pageInfo"]["endCursor"])
    assert [n["number"] for n in rest["nodes"]] == [4, 2] and not rest["pageInfo"]["hasNextPage"]
    none = await runs_of(client, tenant, status=["CANCELED"])
    assert none == {"totalCount": 0, "pageInfo": {"hasNextPage": False, "endCursor": None}, "nodes": []}


EVERY_STACK = """query($first: Int!, $type: [RunType!]) { organization(slug: "acme") {
  stacks { slug runs(first: $first, type: $type) { nodes { number type } } } } }"""


async def test_the_runs_of_several_stacks_read_together_match_each_stack_read_alone(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    # A page of one stack is read by its own statement; pages of several stacks asked for in
    # one query (the organization's list) share a ranked one: both give the same runs.
    plans = {"net": ["plan", "apply", "plan"], "db": ["apply", "apply", "plan", "apply"], "idle": []}
    for slug, kinds in plans.items():
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
        for kind in kinds:
            await start(ctx, tenant.token, "acme", slug, kind)
    for variables in ({"first": 2}, {"first": 10, "type": ["APPLY"]}):
        body = (
            await client.post(
                "/graphql", json={"query": EVERY_STACK, "variables": variables}, headers=tenant.headers
            )
        ).json()
        assert not body.get("errors"), body["errors"]
        together = {s["slug"]: s["runs"]["nodes"] for s in body["data"]["organization"]["stacks"]}
        alone = {}
        for slug in plans:
            single = RUNS.replace('stack(slug: "net")', f'stack(slug: "{slug}")')
            answer = (
                await client.post(
                    "/graphql", json={"query": single, "variables": variables}, headers=tenant.headers
                )
            ).json()
            alone[slug] = [
                {"number": n["number"], "type": n["type"]}
                for n in answer["data"]["organization"]["stack"]["runs"]["nodes"]
            ]
        assert together == alone
    assert together == {
        "net": [{"number": 2, "type": "APPLY"}],
        "db": [
            {"number": 4, "type": "APPLY"},
            {"number": 2, "type": "APPLY"},
            {"number": 1, "type": "APPLY"},
        ],
        "idle": [],
    }


async def test_a_stack_page_shows_starters_and_queue_positions_at_no_extra_statement(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, app_statements: StatementCounter
) -> None:
    # The page statement of one stack reads its starters' emails and queued runs' positions too.
    await _one_holding_three_queued(ctx, tenant)
    page = 'query { organization(slug: "acme") { stack(slug: "net") { runs(first: 10) { nodes { number %s } } } } }'

    async def statements_for(fields: str) -> tuple[int, list[dict[str, Any]]]:
        with app_statements.counting() as statements:
            body = (
                await client.post("/graphql", json={"query": page % fields}, headers=tenant.headers)
            ).json()
        assert not body.get("errors"), body["errors"]
        # SQLite counts the read transaction's BEGIN as a statement; PostgreSQL reads without one.
        read = [s for s in statements if s != "BEGIN"]
        return len(read), body["data"]["organization"]["stack"]["runs"]["nodes"]

    plain, _ = await statements_for("status")
    shown, nodes = await statements_for("status createdBy queuePosition")
    # The caller with the organization and the stack (api/graphql/org_root.py), and the page: no
    # statement for the starters' emails or the queue positions.
    assert shown == plain == 2, app_statements.statements
    assert [(n["number"], n["createdBy"], n["queuePosition"]) for n in nodes] == [
        (4, tenant.email, 3),
        (3, tenant.email, 2),
        (2, tenant.email, 1),
        (1, tenant.email, None),
    ]


async def test_a_stack_page_counts_its_total_in_its_own_statement(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, app_statements: StatementCounter
) -> None:
    # Asked for (directly or through a fragment), the total comes with the page's statement; it
    # counts every run that passes the filters, on any page.
    await _one_holding_three_queued(ctx, tenant)
    page = """query($status: [RunStatus!], $after: String) { organization(slug: "acme") {
      stack(slug: "net") { runs(first: 2, status: $status, after: $after) { %s } } } }"""
    fragment = " fragment Total on RunConnection { totalCount }"

    async def answer(selection: str, **variables: Any) -> tuple[int, dict[str, Any]]:
        query = page % selection + (fragment if "...Total" in selection else "")
        with app_statements.counting() as statements:
            body = (
                await client.post(
                    "/graphql",
                    json={"query": query, "variables": variables},
                    headers=tenant.headers,
                )
            ).json()
        assert not body.get("errors"), body["errors"]
        read = [s for s in statements if s != "BEGIN"]
        return len(read), body["data"]["organization"]["stack"]["runs"]

    plain, _ = await answer("nodes { number }")
    counted, runs = await answer("total: totalCount nodes { number }")
    assert counted == plain == 2, app_statements.statements  # the caller with the stack; the page
    assert (runs["total"], [n["number"] for n in runs["nodes"]]) == (4, [4, 3])
    by_fragment, runs = await answer("...Total nodes { number }", status=["QUEUED"], after="4")
    assert by_fragment == plain, app_statements.statements
    assert (runs["totalCount"], [n["number"] for n in runs["nodes"]]) == (3, [3, 2])
    # Past the last run the page is empty and says nothing of the total: it is counted apart.
    past, runs = await answer("totalCount nodes { number }", after="1")
    assert (runs["totalCount"], runs["nodes"], past) == (4, [], plain + 1)


async def test_a_stack_is_read_with_its_organization_in_one_statement(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, app_statements: StatementCounter
) -> None:
    # A query about one stack of an organization reads both at once; another stack in the same
    # query, a missing one, and an organization the caller is not in still answer rightly.
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    await make_stack(ctx, tenant, {"slug": "db", "repository": "file:///repo"})
    await make_tenant(ctx, "globex", "grace@example.com")

    async def answer(query: str, **variables: Any) -> tuple[int, dict[str, Any]]:
        with app_statements.counting() as statements:
            body = (
                await client.post(
                    "/graphql", json={"query": query, "variables": variables}, headers=tenant.headers
                )
            ).json()
        assert not body.get("errors"), body["errors"]
        return len([s for s in statements if s != "BEGIN"]), body["data"]

    one = 'query($s: String!) { organization(slug: "acme") { slug stack(slug: $s) { slug name } } }'
    count, data = await answer(one, s="net")
    assert data == {"organization": {"slug": "acme", "stack": {"slug": "net", "name": "net"}}}
    # The caller, the organization and its stack, in one statement (api/graphql/org_root.py).
    assert count == 1, app_statements.statements
    count, data = await answer(one, s="nope")
    assert data == {"organization": {"slug": "acme", "stack": None}} and count == 1
    two = 'query { organization(slug: "acme") { a: stack(slug: "net") { slug } b: stack(slug: "db") { slug } } }'
    count, data = await answer(two)
    assert data == {"organization": {"a": {"slug": "net"}, "b": {"slug": "db"}}} and count == 3
    outsider = 'query { organization(slug: "globex") { stack(slug: "net") { slug } } }'
    assert (await answer(outsider))[1] == {"organization": None}


async def test_the_runs_of_a_page_share_their_stacks_object(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A page of one stack's runs makes one GraphQL Stack object for all of them (types/runs.py),
    # not one per run; the answer is the same for each run.
    await _one_holding_three_queued(ctx, tenant)
    await make_stack(ctx, tenant, {"slug": "db", "repository": "file:///repo"})
    await start(ctx, tenant.token, "acme", "db", "plan")
    made: list[str] = []
    post_init = catalog_types.Stack.__post_init__

    def counted(self: catalog_types.Stack) -> None:
        made.append(self.row.slug)
        post_init(self)

    monkeypatch.setattr(catalog_types.Stack, "__post_init__", counted)
    query = """{ organization(slug: "acme") { stack(slug: "net") { runs(first: 10) {
      nodes { number stack { slug name } } } } activeRuns { number stack { slug } } } }"""
    body = (await client.post("/graphql", json={"query": query}, headers=tenant.headers)).json()
    assert not body.get("errors"), body["errors"]
    nodes = body["data"]["organization"]["stack"]["runs"]["nodes"]
    assert [(n["number"], n["stack"]) for n in nodes] == [
        (number, {"slug": "net", "name": "net"}) for number in (4, 3, 2, 1)
    ]
    active = sorted((r["stack"]["slug"], r["number"]) for r in body["data"]["organization"]["activeRuns"])
    assert active == [("db", 1), ("net", 1), ("net", 2), ("net", 3), ("net", 4)]
    # The organization's `stack` field, then one for the runs of `net` and one for `db`'s.
    assert sorted(made) == ["db", "net", "net"], made
