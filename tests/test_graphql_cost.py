"""Query cost stays flat as data grows: SQL statements counted on the engine for big and small
data give the same count, and queries that are too deep or too wide are refused."""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import insert, select, update
from starlette.applications import Starlette

from conftest import Tenant, make_stack
from firstlume.api.graphql.context import GraphQLContext
from firstlume.api.graphql.schema import MAX_ALIASES, MAX_DEPTH, schema
from firstlume.db.models import ResourceChange, Run, RunStep, Stack
from firstlume.db.types import utcnow
from firstlume.protocol.executor import LogBatch
from firstlume.services import accounts, dispatch, execution
from firstlume.services.context import Context
from support.runs import start
from support.statements import StatementCounter

ORG = "acme"
FINISHED_CYCLE = ["applied", "planned", "failed", "no_changes", "discarded", "canceled"]


async def seed_runs(ctx: Context, tenant: Tenant, slug: str, count: int) -> list[str]:
    """`count` runs on a new stack, with steps, creators and approvers: mostly finished, the
    newest three queued and one awaiting approval."""
    await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo", "folder": "prod/eu"})
    async with ctx.unit() as unit:
        session = unit.session
        actor = await accounts.authenticate(session, tenant.token)
        stack = await session.scalar(select(Stack).where(Stack.slug == slug))
        assert stack is not None
        now = utcnow()
        rows = []
        for number in range(1, count + 1):
            if number > count - 3:
                status = "queued"
            elif number == count - 3:
                status = "awaiting_approval"
            else:
                status = FINISHED_CYCLE[number % len(FINISHED_CYCLE)]
            row = {
                    "org_id": stack.org_id, "stack_id": stack.id, "number": number, "type": "apply", "status": status,
                    "created_at": now + timedelta(seconds=number), "updated_at": now, "created_by_id": actor.user_id,
                    "approved_by_id": actor.user_id if status == "applied" else None, "acknowledged": [],
                    "variables_used": [{"name": "region", "origin": "organization", "sensitive": False}],
                    "state_backends": [{"unit": ".", "backend": "local"}], "commit_sha": "c" * 40, "has_plan": True,
                    "summary_create": number,
            }  # fmt: skip
            rows.append(row)
        await session.execute(insert(Run), rows)
        await session.execute(update(Stack).where(Stack.id == stack.id).values(run_counter=count))
        ids = list(await session.scalars(select(Run.id).where(Run.stack_id == stack.id)))
        steps = [
            {
                "run_id": run_id,
                "name": name,
                "position": i,
                "status": "done",
                "started_at": now,
                "finished_at": now,
            }
            for run_id in ids
            for i, name in enumerate(("checkout", "init", "plan"))
        ]
        await session.execute(insert(RunStep), steps)
    return ids


STACK_PAGE = """query($stack: String!, $after: String) { organization(slug: "acme") {
  stack(slug: $stack) {
    slug folder { path parent { path } } settings { effective { requireApproval { value origin } } } variables { name }
    runs(first: 100, after: $after) {
      totalCount pageInfo { hasNextPage endCursor }
      nodes {
        id number status awaitingApproval queuePosition createdBy createdAt
        stack { slug folder { path } }
        commit { sha } steps { name status durationMs } summary { text }
        approval { required approvedBy acknowledged }
        configuration { settings { requireApproval { value } } variables { name origin } }
        stateBackends { unit backend }
        changes { summary { text } groups { count } }
      }
    }
  }
  activeRuns { id queuePosition stack { slug } steps { name } }
} }"""


async def count_query(client: httpx.AsyncClient, app_statements: StatementCounter, tenant: Tenant, query: str, **variables: Any) -> tuple[int, Any]:  # fmt: skip
    with app_statements.counting() as statements:
        response = await client.post(
            "/graphql", json={"query": query, "variables": variables}, headers=tenant.headers
        )
    body = response.json()
    assert not body.get("errors"), body["errors"]
    return len(statements), body["data"]


async def test_a_stack_with_200_runs_costs_as_few_statements_as_one_with_5(
    client: httpx.AsyncClient,
    app_statements: StatementCounter,
    ctx: Context,
    tenant: Tenant,
    database_url: str,
) -> None:
    await seed_runs(ctx, tenant, "small", 5)
    await seed_runs(ctx, tenant, "big", 200)

    small, small_data = await count_query(client, app_statements, tenant, STACK_PAGE, stack="small")
    big, big_data = await count_query(client, app_statements, tenant, STACK_PAGE, stack="big")
    cursor = big_data["organization"]["stack"]["runs"]["pageInfo"]["endCursor"]
    second, second_data = await count_query(
        client, app_statements, tenant, STACK_PAGE, stack="big", after=cursor
    )

    runs = big_data["organization"]["stack"]["runs"]
    assert len(runs["nodes"]) == 100 and runs["totalCount"] == 200 and runs["pageInfo"]["hasNextPage"]
    assert [n["number"] for n in runs["nodes"]] == list(range(200, 100, -1))
    assert [n["queuePosition"] for n in runs["nodes"][:4]] == [3, 2, 1, None]
    assert runs["nodes"][0]["steps"][0] == {"name": "checkout", "status": "DONE", "durationMs": 0}
    assert [n["number"] for n in second_data["organization"]["stack"]["runs"]["nodes"]] == list(
        range(100, 0, -1)
    )
    assert len(small_data["organization"]["stack"]["runs"]["nodes"]) == 5
    # As many statements for 200 runs as for 5: one per kind of related row, never one per run.
    # The exact number moves by one or two with how loads fall into batches. The whole request
    # reads in one transaction (SQLite counts its BEGIN as a statement).
    bound = 20
    assert max(small, big, second) <= bound, app_statements.statements
    print(
        f"\n{database_url.split(':')[0]}: 5 runs {small}, 100 of 200 runs {big} and {second} SQL statements"
    )


RUN_CHANGES = """query($id: ID!, $after: String, $action: ChangeAction) { organization(slug: "acme") {
  run(id: $id) {
    status steps { name } log { nextOffset }
    changes(first: 100, after: $after, action: $action) {
      summary { text } totalCount types units counts { delete replace update create total }
      pageInfo { hasNextPage endCursor }
      groups { action title count total changes { address } }
      nodes { address type unit action state error replacedBecause stages { action state }
              attributes { name before after forcesReplacement } } }
} } }"""


def change_row(run_id: str, i: int, action: str) -> dict[str, Any]:
    stages = (
        [{"action": "delete", "state": None}, {"action": "create", "state": None}]
        if action == "replace"
        else []
    )
    return {
        "run_id": run_id, "position": i, "address": f"terraform_data.r{i}", "type": "terraform_data", "unit": ".",
        "action": action, "replaced_because": ["triggers_replace"] if action == "replace" else [],
        "attributes": [{"name": "input", "before": "a", "after": "(sensitive)", "forces_replacement": False}],
        "state": None, "error": None, "stages": stages,
    }  # fmt: skip


async def run_with_changes(ctx: Context, tenant: Tenant, slug: str, count: int) -> str:
    await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, ORG, slug, "apply")
    actions = itertools.cycle(["create", "update", "delete", "replace"])
    async with ctx.unit() as unit:
        await unit.session.execute(
            insert(ResourceChange),
            [change_row(run_id, i, action) for i, action in zip(range(count), actions, strict=False)],
        )
        await unit.session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(
                has_plan=True,
                **{f"summary_{action}": count // 4 for action in ("create", "update", "delete", "replace")},
            )
        )
    return run_id


STACK_PAGE_IN_FRAGMENTS = """query($stack: String!) { organization(slug: "acme") { ...OneStack } }
fragment OneStack on Organization { stack(slug: $stack) { slug runs(first: 20) { ... on RunConnection { totalCount }
  nodes { number } } } }"""
STACK_PAGE_PLAIN = """query($stack: String!) { organization(slug: "acme") {
  stack(slug: $stack) { slug runs(first: 20) { totalCount nodes { number } } } } }"""


async def test_what_a_query_selects_through_fragments_is_read_as_if_selected_directly(
    client: httpx.AsyncClient, app_statements: StatementCounter, ctx: Context, tenant: Tenant
) -> None:
    # The organization reads the one stack a query asks for in its own statement, and a page of
    # runs reads its total with the page, when the query selects them: also when it does so
    # through a named or an inline fragment (api/graphql/selections.py).
    await seed_runs(ctx, tenant, "net", 30)
    plain, plain_data = await count_query(client, app_statements, tenant, STACK_PAGE_PLAIN, stack="net")
    fragments, fragments_data = await count_query(
        client, app_statements, tenant, STACK_PAGE_IN_FRAGMENTS, stack="net"
    )
    assert fragments_data == plain_data
    assert plain_data["organization"]["stack"]["runs"]["totalCount"] == 30
    assert fragments == plain, app_statements.statements


async def test_a_page_of_a_run_with_5000_changes_costs_as_few_statements_as_one_with_4(
    client: httpx.AsyncClient,
    app_statements: StatementCounter,
    ctx: Context,
    tenant: Tenant,
    database_url: str,
) -> None:
    small_run = await run_with_changes(ctx, tenant, "small", 4)
    big_run = await run_with_changes(ctx, tenant, "big", 5000)
    small, _ = await count_query(client, app_statements, tenant, RUN_CHANGES, id=small_run)
    big, big_data = await count_query(client, app_statements, tenant, RUN_CHANGES, id=big_run)
    changes = big_data["organization"]["run"]["changes"]
    assert [(g["action"], g["count"], g["total"]) for g in changes["groups"]] == [
        ("DELETE", 1250, 1250),
        ("REPLACE", 1250, 1250),
        ("UPDATE", 1250, 1250),
        ("CREATE", 1250, 1250),
    ]
    assert (
        changes["totalCount"] == 5000 and changes["types"] == ["terraform_data"] and changes["units"] == ["."]
    )
    # The page: the first 100 deletions, in plan order; the groups hold this page's changes.
    assert [c["address"] for c in changes["nodes"]] == [f"terraform_data.r{i}" for i in range(2, 400, 4)]
    assert [len(g["changes"]) for g in changes["groups"]] == [100, 0, 0, 0]
    assert changes["pageInfo"]["hasNextPage"]
    after = changes["pageInfo"]["endCursor"]
    second, second_data = await count_query(
        client, app_statements, tenant, RUN_CHANGES, id=big_run, after=after
    )
    assert [c["address"] for c in second_data["organization"]["run"]["changes"]["nodes"]] == [
        f"terraform_data.r{i}" for i in range(402, 800, 4)
    ]
    replaced, replaced_data = await count_query(
        client, app_statements, tenant, RUN_CHANGES, id=big_run, action="REPLACE"
    )
    replacements = replaced_data["organization"]["run"]["changes"]
    assert replacements["totalCount"] == 1250 and replacements["counts"]["delete"] == 0
    assert replacements["nodes"][0]["stages"] == [
        {"action": "DELETE", "state": None},
        {"action": "CREATE", "state": None},
    ]
    # The caller, the organization, the run, its steps and its log; then the counts per group
    # (over every match), the page (only its rows) and the facets: one more statement than when
    # every change was sent, because the counts no longer come from the rows sent. SQLite adds
    # the BEGIN of the request's one read transaction.
    bound = 9 if database_url.startswith("sqlite") else 8
    assert max(small, big, second, replaced) <= bound, app_statements.statements
    print(
        f"\n{database_url.split(':')[0]}: a page of a run with 4 changes {small}, with 5000 changes {big}, "
        f"{second} and {replaced} SQL statements"
    )


async def signed_in(served: Context, tenant: Tenant) -> GraphQLContext:
    """A GraphQL context of the served app, signed in as the tenant, for schema.subscribe."""
    graphql_context = GraphQLContext(app=served, connection=None, response=None)  # type: ignore[arg-type]
    async with served.db.transaction() as session:
        graphql_context.actor = await accounts.authenticate(session, tenant.token)
    return graphql_context


async def test_each_log_event_costs_one_small_read_whatever_the_number_of_subscribers(
    app: Starlette, app_statements: StatementCounter, ctx: Context, tenant: Tenant
) -> None:
    """The process reads each new chunk once and hands it to all of its subscribers: the reads of
    the log per event do not grow with the log, nor with the subscribers."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, ORG, "net", "plan")
    [launch] = await dispatch.claim_plans(ctx)
    served: Context = app.state.ctx

    async def append(text: str) -> None:
        # Written through the served app's services, so its pub/sub carries the event.
        async with served.unit() as unit:
            run, _ = await execution.authenticate_phase(unit.session, launch.token, lock=True)
            await execution.append_log(unit, run, LogBatch(offset=run.log_length, step="plan", text=text))

    for i in range(300):
        await append(f"existing line {i}\n")
    graphql_context = await signed_in(served, tenant)
    subscriptions = []
    for _ in range(3):
        subscription = await schema.subscribe(
            'subscription($id: ID!) { runLog(org: "acme", runId: $id) { text nextOffset } }',
            variable_values={"id": run_id},
            context_value=graphql_context,
        )
        assert hasattr(subscription, "__anext__")
        first = await asyncio.wait_for(anext(subscription), 10)
        assert first.data["runLog"]["text"].count("existing line") == 300  # type: ignore[index]
        subscriptions.append(subscription)

    per_event = []
    for i in range(3):
        with app_statements.counting() as statements:
            await append(f"new line {i}\n")
            results = [await asyncio.wait_for(anext(s), 10) for s in subscriptions]
        assert {r.data["runLog"]["text"] for r in results} == {f"new line {i}\n"}  # type: ignore[index]
        per_event.append(len([s for s in statements if "FROM log_chunks" in s]))
    for subscription in subscriptions:
        await subscription.aclose()  # type: ignore[attr-defined]
    assert per_event == [1, 1, 1], app_statements.statements


async def test_a_run_status_change_is_read_once_for_every_active_runs_subscriber(
    app: Starlette, app_statements: StatementCounter, ctx: Context, tenant: Tenant
) -> None:
    """The process keeps one feed of an organization's active runs for all of its subscribers
    (every open page has one): the runs an event names are read once, whatever their number."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    served: Context = app.state.ctx
    graphql_context = await signed_in(served, tenant)
    subscriptions = []
    for _ in range(5):
        subscription = await schema.subscribe(
            'subscription { activeRuns(org: "acme") { id status } }', context_value=graphql_context
        )
        assert hasattr(subscription, "__anext__")
        first = await asyncio.wait_for(anext(subscription), 10)
        assert first.data == {"activeRuns": []}  # type: ignore[union-attr]
        subscriptions.append(subscription)

    reads = []
    try:
        for _ in range(2):
            with app_statements.counting() as statements:
                # Through the served app's services, so that its pub/sub carries the event.
                run_id = await start(served, tenant.token, ORG, "net", "plan")
                results = [await asyncio.wait_for(anext(s), 10) for s in subscriptions]
            for result in results:
                assert {"id": run_id, "status": "QUEUED"} in result.data["activeRuns"]  # type: ignore[index]
            reads.append(len([s for s in statements if "FROM runs" in s and "runs.id IN" in s]))
    finally:
        for subscription in subscriptions:
            await subscription.aclose()  # type: ignore[attr-defined]
    assert reads == [1, 1], app_statements.statements


# Depth and breadth ----------------------------------------------------------------------------


async def test_queries_deeper_than_the_limit_are_refused(client: httpx.AsyncClient, tenant: Tenant) -> None:
    nested = "path"
    for _ in range(MAX_DEPTH):
        nested = f"parent {{ {nested} }}"
    too_deep = f'{{ organization(slug: "acme") {{ folder(path: "x") {{ {nested} }} }} }}'
    body = (await client.post("/graphql", json={"query": too_deep}, headers=tenant.headers)).json()
    assert body["data"] is None
    assert "exceeds maximum operation depth" in body["errors"][0]["message"]

    cycle = '{ organization(slug: "acme") { stacks { runs { nodes { stack { runs { nodes { stack { runs { nodes { stack { runs { nodes { id } } } } } } } } } } } } } }'
    body = (await client.post("/graphql", json={"query": cycle}, headers=tenant.headers)).json()
    assert body["data"] is None and "exceeds maximum operation depth" in body["errors"][0]["message"]


async def test_too_many_aliases_are_refused(client: httpx.AsyncClient, tenant: Tenant) -> None:
    fields = " ".join(
        f'o{i}: organization(slug: "acme") {{ activeRuns {{ id }} }}' for i in range(MAX_ALIASES + 1)
    )
    body = (await client.post("/graphql", json={"query": f"{{ {fields} }}"}, headers=tenant.headers)).json()
    assert body["data"] is None
    assert "aliases" in body["errors"][0]["message"].lower()


async def test_introspection_still_works_within_the_limits(client: httpx.AsyncClient, tenant: Tenant) -> None:
    from graphql import get_introspection_query

    body = (
        await client.post("/graphql", json={"query": get_introspection_query()}, headers=tenant.headers)
    ).json()
    assert not body.get("errors") and body["data"]["__schema"]["queryType"]["name"] == "Query"
