"""A query whose only root field is `organization(slug:)` (every page of the web UI) authenticates
its caller in the statement that reads the organization and the one stack it asks for
(api/graphql/org_root.py). Its answers must be those of the usual path, which a query takes when
it has another root field beside (`__typename` here); only the statement count differs."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from graphql import OperationDefinitionNode, parse

from conftest import Tenant, make_stack, make_tenant
from firstlume.api.graphql.org_root import OrgRoot, shape_of
from firstlume.services.context import Context
from support.runs import start
from support.statements import StatementCounter

STACK_PAGE = """query($org: String!, $slug: String!) { organization(slug: $org) {
  slug name stack(slug: $slug) { slug runs(first: 20) { totalCount nodes { number status createdBy } } } } }"""
ORG_PAGE = """query($org: String!) { organization(slug: $org) { slug stacks { slug } } }"""
TWO_STACKS = """query($org: String!) { organization(slug: $org) {
  a: stack(slug: "net") { slug } b: stack(slug: "db") { slug } } }"""
IN_FRAGMENT = """query($org: String!, $slug: String!) { organization(slug: $org) { ...Page } }
fragment Page on Organization { slug ... on Organization { stack(slug: $slug) { slug } } }"""


def usual(query: str) -> str:
    """The same query with a second root field: it takes the usual path."""
    return query.replace("{ organization(", "{ __typename organization(", 1)


async def answer(
    client: httpx.AsyncClient, statements: StatementCounter, tenant: Tenant, query: str, **variables: Any
) -> tuple[Any, int]:
    with statements.counting() as ran:
        response = await client.post(
            "/graphql", json={"query": query, "variables": variables}, headers=tenant.headers
        )
    assert response.status_code == 200, response.text
    body = response.json()
    if body.get("data"):
        body["data"].pop("__typename", None)
    for error in body.get("errors") or []:
        error.pop("locations", None)  # the usual path's query is longer by `__typename`
    return body, sum(1 for statement in ran if statement.lstrip().upper().startswith("SELECT"))


@pytest.fixture
async def stacks(ctx: Context, tenant: Tenant) -> None:
    for slug in ("net", "db"):
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
    await start(ctx, tenant.token, tenant.org, "net", "plan")
    other = await make_tenant(ctx, "globex", "grace@example.com")
    await make_stack(ctx, other, {"slug": "secret", "repository": "file:///globex"})


async def test_a_stack_page_reads_caller_organization_and_stack_in_one_statement(
    client: httpx.AsyncClient, app_statements: StatementCounter, tenant: Tenant, stacks: None
) -> None:
    variables = {"org": tenant.org, "slug": "net"}
    quick, quick_count = await answer(client, app_statements, tenant, STACK_PAGE, **variables)
    slow, slow_count = await answer(client, app_statements, tenant, usual(STACK_PAGE), **variables)
    assert quick == slow
    page = quick["data"]["organization"]["stack"]
    assert page["slug"] == "net" and page["runs"]["totalCount"] == 1
    assert page["runs"]["nodes"] == [{"number": 1, "status": "QUEUED", "createdBy": tenant.email}]
    # The caller with the organization and the stack; then the page of runs.
    assert quick_count == 2, app_statements.statements
    assert slow_count == 3, app_statements.statements


@pytest.mark.parametrize(
    ("query", "variables", "expected"),
    [
        (STACK_PAGE, {"org": "acme", "slug": "missing"}, {"slug": "acme", "name": "acme", "stack": None}),
        (STACK_PAGE, {"org": "globex", "slug": "secret"}, None),  # not a member: no such organization
        (STACK_PAGE, {"org": "nowhere", "slug": "net"}, None),
        (ORG_PAGE, {"org": "acme"}, {"slug": "acme", "stacks": [{"slug": "db"}, {"slug": "net"}]}),
        (TWO_STACKS, {"org": "acme"}, {"a": {"slug": "net"}, "b": {"slug": "db"}}),
        (IN_FRAGMENT, {"org": "acme", "slug": "db"}, {"slug": "acme", "stack": {"slug": "db"}}),
    ],
)
async def test_the_answers_are_those_of_the_usual_path(
    client: httpx.AsyncClient,
    app_statements: StatementCounter,
    tenant: Tenant,
    stacks: None,
    query: str,
    variables: dict[str, Any],
    expected: Any,
) -> None:
    quick, quick_count = await answer(client, app_statements, tenant, query, **variables)
    slow, slow_count = await answer(client, app_statements, tenant, usual(query), **variables)
    assert quick == slow
    assert not quick.get("errors"), quick
    assert quick["data"]["organization"] == expected
    assert quick_count == slow_count - 1, app_statements.statements


async def test_a_refused_token_or_a_bad_variable_gets_the_same_errors(
    client: httpx.AsyncClient, app_statements: StatementCounter, tenant: Tenant, stacks: None
) -> None:
    for caller, variables in [
        (Tenant(tenant.org, "not-a-token", tenant.email), {"org": "acme", "slug": "net"}),
        (tenant, {"org": 7, "slug": "net"}),  # refused by validation, not read
        (tenant, {"org": "acme\x00", "slug": "net"}),  # NUL: refused before the database
        (tenant, {"slug": "net"}),  # missing
    ]:
        quick, _ = await answer(client, app_statements, caller, STACK_PAGE, **variables)
        slow, _ = await answer(client, app_statements, caller, usual(STACK_PAGE), **variables)
        assert quick["errors"], quick
        assert quick == slow


async def test_a_get_query_reads_its_variables_from_the_query_string(
    client: httpx.AsyncClient, app_statements: StatementCounter, tenant: Tenant, stacks: None
) -> None:
    with app_statements.counting() as ran:
        response = await client.get(
            "/graphql",
            params={"query": STACK_PAGE, "variables": json.dumps({"org": "acme", "slug": "db"})},
            headers=tenant.headers,
        )
    assert response.status_code == 200, response.text
    assert response.json()["data"]["organization"]["stack"]["slug"] == "db"
    assert sum(1 for s in ran if s.lstrip().upper().startswith("SELECT")) == 2, ran


def _shape(document: str) -> Any:
    parsed = parse(document)
    [operation] = [d for d in parsed.definitions if isinstance(d, OperationDefinitionNode)]
    fragments = {d.name.value: d for d in parsed.definitions if not isinstance(d, OperationDefinitionNode)}
    return shape_of(operation, fragments)  # type: ignore[arg-type]


def test_which_queries_are_about_one_organization() -> None:
    variables = {"org": "acme", "slug": "net"}
    assert _shape(STACK_PAGE).about(variables) == OrgRoot("acme", "net")
    assert _shape(IN_FRAGMENT).about(variables) == OrgRoot("acme", "net")
    assert _shape(TWO_STACKS).about(variables) == OrgRoot("acme", None)  # two stacks: read as before
    assert _shape(
        '{ organization(slug: "acme") { a: stack(slug: "x") { slug } b: stack(slug: "x") { id } } }'
    ).about({}) == OrgRoot("acme", "x")
    assert _shape(STACK_PAGE).about({"org": "acme"}) == OrgRoot("acme", None)
    assert _shape(STACK_PAGE).about({"slug": "net"}) is None
    assert _shape(STACK_PAGE).about(None) is None
    for other in [
        usual(STACK_PAGE),  # two root fields
        "{ viewer { email } }",
        'query($s: Boolean!) { organization(slug: "acme") @include(if: $s) { slug } }',
        "{ organizations { slug } }",
    ]:
        assert _shape(other) is None, other


async def test_a_fragment_that_spreads_itself_is_read_once_and_refused_by_validation(
    client: httpx.AsyncClient, app_statements: StatementCounter, tenant: Tenant, stacks: None
) -> None:
    # The query is read for its shape before validation refuses the cycle: reading must end.
    looping = """{ organization(slug: "acme") { ...Loop } }
    fragment Loop on Organization { stack(slug: "net") { slug } ...Loop }"""
    assert _shape(looping).about({}) == OrgRoot("acme", "net")
    body, _ = await answer(client, app_statements, tenant, looping)
    assert body.get("data") is None and body["errors"], body
    assert "Loop" in body["errors"][0]["message"]
