"""The cost limit: estimated from list sizes and depth, a costly operation is refused before it
runs with `query_too_costly`; every operation of the web UI stays within it (the served test of
/healthz during the most expensive allowed query is tests/e2e/test_graphql_query_cost_served.py)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphql import OperationDefinitionNode, build_schema, parse
from sqlalchemy import event
from starlette.applications import Starlette

from conftest import Tenant
from firstlume.api.graphql import cost
from firstlume.api.graphql.context import GraphQLContext
from firstlume.api.graphql.cost import MAX_COST, estimate
from firstlume.api.graphql.schema import schema
from firstlume.services.context import Context
from test_graphql_cost import seed_runs

FRONTEND = Path(__file__).resolve().parents[1] / "frontend" / "src" / "graphql"
# The served schema as graphql-core types, for estimates made outside a validation.
SERVED = build_schema(schema.as_str())
# The query: runs(first: 100) → stack → runs → … eleven levels deep, no aliases.
NESTED = (
    'query { organization(slug: "acme") { stack(slug: "big") { '
    + ("runs(first: 100) { nodes { id stack { " * 3)
    + "slug"
    + " } } }" * 3
    + " } } }"
)


def cost_of(query: str, variables: dict[str, Any] | None = None) -> int:
    return estimate(SERVED, parse(query), None, variables or {})


def test_every_operation_of_the_web_ui_is_within_the_limit() -> None:
    text = "\n".join(p.read_text() for p in sorted(FRONTEND.glob("*.graphql")))
    document = parse(text)
    names = [d.name.value for d in document.definitions if isinstance(d, OperationDefinitionNode) and d.name]
    assert "RunChangeGroup" in names and "StackPage" in names
    for name in names:
        cost = estimate(SERVED, document, name, {"first": 100})
        assert 0 < cost <= MAX_COST, (name, cost)


def test_the_estimate_grows_with_list_sizes_and_depth() -> None:
    one = cost_of('{ organization(slug: "a") { stack(slug: "s") { runs(first: 10) { nodes { id } } } } }')
    ten = cost_of('{ organization(slug: "a") { stack(slug: "s") { runs(first: 100) { nodes { id } } } } }')
    assert ten - one == 270  # runs, nodes and id, for 90 more runs
    by_variable = 'query($n: Int!) { organization(slug: "a") { stack(slug: "s") { runs(first: $n) { nodes { id } } } } }'
    assert cost_of(by_variable, {"n": 100}) == ten
    assert cost_of(NESTED) > 100**3 >= MAX_COST


async def test_a_document_is_estimated_once_per_operation_and_page_sizes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[int] = []

    def counted(*args: Any) -> int:
        made.append(estimate(*args))
        return made[-1]

    monkeypatch.setattr(cost, "estimate", counted)
    # A text of its own: what is kept lives as long as the process.
    text = f"""query Page($n: Int!, $o: String!) {{ organization(slug: $o) {{
      p{uuid.uuid4().hex}: stack(slug: "s") {{ runs(first: $n) {{ nodes {{ id }} }} }} }} }}
    query Other($o: String!) {{ organization(slug: $o) {{ stacks {{ slug }} }} }}"""
    # Without a caller: validated (and estimated), then refused by the first resolver.
    anonymous = GraphQLContext(app=None, connection=None, response=None)  # type: ignore[arg-type]

    async def codes(name: str = "Page", **variables: Any) -> list[str]:
        result = await schema.execute(
            text, variable_values=variables, context_value=anonymous, operation_name=name
        )
        return [str((error.extensions or {}).get("code")) for error in result.errors or ()]

    assert await codes(n=10, o="acme") == ["unauthenticated"] and len(made) == 1
    # Other variables, the same page size: neither validated nor estimated again.
    assert await codes(o="globex", n=10) == ["unauthenticated"] and len(made) == 1
    assert await codes(n=100, o="acme") == ["unauthenticated"] and len(made) == 2
    assert await codes(n=10**6, o="acme") == ["query_too_costly"] and len(made) == 3
    assert await codes("Other", o="acme") == ["unauthenticated"] and len(made) == 4
    assert await codes(n=100, o="initech") == ["unauthenticated"] and len(made) == 4


async def test_a_costly_query_is_refused_before_it_runs(app: Starlette, ctx: Context, tenant: Tenant) -> None:
    await seed_runs(ctx, tenant, "big", 5)
    statements: list[str] = []
    engines = [app.state.ctx.db.engine.sync_engine]

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    for engine in engines:
        event.listen(engine, "before_cursor_execute", record)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="client://t") as client:
            response = await client.post("/graphql", json={"query": NESTED}, headers=tenant.headers)
            refused = [s for s in statements if "runs" in s.lower()]
            by_variable = await client.post(
                "/graphql",
                json={
                    "query": NESTED.replace("first: 100", "first: $n").replace(
                        "query {", "query($n: Int!) {"
                    ),
                    "variables": {"n": 100},
                },
                headers=tenant.headers,
            )
            small = await client.post(
                "/graphql",
                json={
                    "query": NESTED.replace("first: 100", "first: $n").replace(
                        "query {", "query($n: Int!) {"
                    ),
                    "variables": {"n": 2},
                },
                headers=tenant.headers,
            )
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", record)
    body = response.json()
    assert response.status_code == 200 and body["data"] is None
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "query_too_costly" and error["extensions"]["limit"] == MAX_COST
    assert error["extensions"]["cost"] > MAX_COST and "limit is 1,000,000" in error["message"]
    # Refused before execution: not one statement read a run.
    assert refused == []
    assert by_variable.json()["errors"][0]["extensions"]["code"] == "query_too_costly"
    assert "errors" not in small.json() and small.json()["data"]["organization"]["stack"]["runs"]["nodes"]
