"""Stack dependencies (adoption-api.md, section 9), in process on SQLite and PostgreSQL: setting
and reading them over REST and GraphQL, cycles refused naming the stacks, another organization's
stacks not found, the dependency graph, and the audit trail."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from conftest import Tenant, make_stack, make_tenant
from firstlume.services import accounts
from firstlume.services.access.roles import Role
from firstlume.services.context import Context


def deps_url(tenant: Tenant, stack: str) -> str:
    return f"/api/v1/orgs/{tenant.org}/stacks/{stack}/dependencies"


@pytest.fixture
async def layered(ctx: Context, tenant: Tenant) -> Tenant:
    for slug in ("network", "cluster", "app"):
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///nowhere"})
    return tenant


async def put(client: httpx.AsyncClient, tenant: Tenant, stack: str, body: dict[str, Any]) -> httpx.Response:
    return await client.put(deps_url(tenant, stack), json=body, headers=tenant.headers)


async def test_dependencies_are_set_and_read_in_both_directions(
    client: httpx.AsyncClient, layered: Tenant
) -> None:
    t = layered
    answer = await put(
        client, t, "cluster", {"depends_on": [{"stack": "network", "outputs": {"vpc_id": "vpc_id"}}]}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "stack": "cluster",
        "depends_on": [{"stack": "network", "outputs": {"vpc_id": "vpc_id"}}],
        "dependents": [],
    }
    answer = await put(
        client, t, "app", {"depends_on": [{"stack": "cluster", "outputs": {"cluster_id": "cluster"}}]}
    )
    assert answer.status_code == 200, answer.text
    read = (await client.get(deps_url(t, "cluster"), headers=t.headers)).json()
    assert read["depends_on"] == [{"stack": "network", "outputs": {"vpc_id": "vpc_id"}}]
    assert read["dependents"] == [{"stack": "app", "outputs": {"cluster_id": "cluster"}}]
    # The whole list is replaced: an empty one removes the dependency.
    answer = await put(client, t, "app", {"depends_on": []})
    assert answer.json()["depends_on"] == []
    read = (await client.get(deps_url(t, "cluster"), headers=t.headers)).json()
    assert read["dependents"] == []


async def test_a_cycle_is_refused_naming_its_stacks_and_nothing_changes(
    client: httpx.AsyncClient, layered: Tenant
) -> None:
    t = layered
    await put(client, t, "cluster", {"depends_on": [{"stack": "network", "outputs": {"vpc_id": "vpc_id"}}]})
    await put(
        client, t, "app", {"depends_on": [{"stack": "cluster", "outputs": {"cluster_id": "cluster_id"}}]}
    )
    answer = await put(
        client, t, "network", {"depends_on": [{"stack": "app", "outputs": {"url": "app_url"}}]}
    )
    assert answer.status_code == 409
    error = answer.json()["error"]
    assert error["code"] == "dependency_cycle"
    assert error["stacks"] == ["app", "cluster", "network", "app"]
    assert "app → cluster → network → app" in error["message"]
    assert (await client.get(deps_url(t, "network"), headers=t.headers)).json()["depends_on"] == []
    # A stack that reads itself is the shortest cycle.
    answer = await put(client, t, "app", {"depends_on": [{"stack": "app", "outputs": {"x": "y"}}]})
    assert answer.status_code == 409 and answer.json()["error"]["stacks"] == ["app", "app"]


async def test_another_organizations_stack_is_not_found(
    ctx: Context, client: httpx.AsyncClient, layered: Tenant
) -> None:
    other = await make_tenant(ctx, "globex", "eve@example.com")
    await make_stack(ctx, other, {"slug": "secret-net", "repository": "file:///nowhere"})
    answer = await put(
        client, layered, "cluster", {"depends_on": [{"stack": "secret-net", "outputs": {"vpc_id": "vpc_id"}}]}
    )
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"
    # Nor can the other organization read or set this one's.
    assert (await client.get(deps_url(layered, "cluster"), headers=other.headers)).status_code == 404
    answer = await client.put(
        f"/api/v1/orgs/{other.org}/stacks/secret-net/dependencies",
        json={"depends_on": [{"stack": "network", "outputs": {"vpc_id": "vpc_id"}}]},
        headers=other.headers,
    )
    assert answer.status_code == 404


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"depends_on": [{"stack": "network", "outputs": {}}]}, "at least one output"),
        ({"depends_on": [{"stack": "network", "outputs": {"vpc-id": "vpc_id"}}]}, "'vpc-id'"),
        (
            {"depends_on": [{"stack": "network", "outputs": {"a": 5}}]},
            "item 0: 'outputs' must map output names",
        ),
        ({"depends_on": [{"stack": "network"}]}, "'depends_on' item 0 needs 'outputs'"),
        ({"depends_on": [{"stack": "network", "outputs": {"a": "b"}, "x": 1}]}, "unknown field 'x'"),
        ({"depends_on": ["network"]}, "item 0 must be an object"),
        ({"depends_on": [{"stack": "Not A Slug", "outputs": {"a": "b"}}]}, "stack"),
        ({"depends_on": "network"}, "depends_on"),
        ({}, "depends_on"),
    ],
)
async def test_bad_input_is_refused_with_a_sentence_and_nothing_changes(
    client: httpx.AsyncClient, layered: Tenant, body: dict[str, Any], words: str
) -> None:
    answer = await put(client, layered, "cluster", body)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and error["field"].startswith("depends_on")
    assert words in error["message"]
    assert (await client.get(deps_url(layered, "cluster"), headers=layered.headers)).json()[
        "depends_on"
    ] == []


async def test_a_stack_listed_twice_is_refused(client: httpx.AsyncClient, layered: Tenant) -> None:
    one = {"stack": "network", "outputs": {"vpc_id": "vpc_id"}}
    answer = await put(client, layered, "cluster", {"depends_on": [one, one]})
    assert answer.status_code == 422
    assert "listed twice" in answer.json()["error"]["message"]


async def test_the_graph_lists_every_stack_with_its_last_run_and_every_edge(
    ctx: Context, client: httpx.AsyncClient, layered: Tenant
) -> None:
    t = layered
    await put(client, t, "cluster", {"depends_on": [{"stack": "network", "outputs": {"vpc_id": "vpc_id"}}]})
    await put(
        client, t, "app", {"depends_on": [{"stack": "cluster", "outputs": {"cluster_id": "cluster_id"}}]}
    )
    started = await client.post(
        f"/api/v1/orgs/{t.org}/stacks/network/runs", json={"type": "plan"}, headers=t.headers
    )
    assert started.status_code == 201, started.text
    graph = (await client.get(f"/api/v1/orgs/{t.org}/dependency-graph", headers=t.headers)).json()
    nodes = {n["stack"]: n for n in graph["nodes"]}
    assert sorted(nodes) == ["app", "cluster", "network"]
    assert nodes["network"]["last_run"] == {"id": started.json()["id"], "status": "queued"}
    assert nodes["app"]["last_run"] is None
    assert graph["edges"] == [
        {"from": "cluster", "to": "app", "outputs": {"cluster_id": "cluster_id"}},
        {"from": "network", "to": "cluster", "outputs": {"vpc_id": "vpc_id"}},
    ]


async def test_setting_dependencies_needs_an_admin_and_is_audited(
    ctx: Context, client: httpx.AsyncClient, layered: Tenant
) -> None:
    t = layered
    reader = await make_tenant_member(ctx, t, "rita@example.com", Role.READER)
    body = {"depends_on": [{"stack": "network", "outputs": {"vpc_id": "vpc_id"}}]}
    assert (await client.put(deps_url(t, "cluster"), json=body, headers=reader)).status_code == 403
    assert (await client.get(deps_url(t, "cluster"), headers=reader)).status_code == 200
    assert (await put(client, t, "cluster", body)).status_code == 200
    entries = (
        await client.get(f"/api/v1/orgs/{t.org}/audit?action=stack.dependencies.update", headers=t.headers)
    ).json()["entries"]
    assert len(entries) == 1
    assert entries[0]["target"] == "stack:cluster" and entries[0]["actor"] == t.email
    assert entries[0]["details"] == {"depends_on": [{"stack": "network", "outputs": ["vpc_id → vpc_id"]}]}


async def make_tenant_member(ctx: Context, t: Tenant, email: str, role: Role) -> dict[str, str]:
    """A member of `t`'s organization with `role`: the headers of a token of theirs."""
    async with ctx.unit() as unit:
        token = await accounts.create_token(unit.session, t.org, email, role=role)
    return {"Authorization": f"Bearer {token}"}


GRAPH_QUERY = """
query($org: String!) { organization(slug: $org) {
  dependencyGraph { nodes { stack lastRunStatus } edges { upstream downstream outputs { output variable } } }
  stack(slug: "cluster") { dependencies { dependsOn { stack } dependents { stack } } }
} }
"""

SET = """
mutation($org: String!, $stack: String!, $deps: [DependencyInput!]!) {
  setStackDependencies(org: $org, stack: $stack, dependsOn: $deps) {
    __typename
    ... on StackDependencies { dependsOn { stack outputs { output variable } } }
    ... on ConflictError { code message }
    ... on NotFoundError { code }
  }
}
"""


async def test_graphql_sets_and_reads_dependencies_and_refuses_a_cycle(
    client: httpx.AsyncClient, layered: Tenant
) -> None:
    t = layered

    async def gql(query: str, **variables: Any) -> dict[str, Any]:
        answer = await client.post(
            "/graphql", json={"query": query, "variables": variables}, headers=t.headers
        )
        body = answer.json()
        assert "errors" not in body, body
        return body["data"]  # type: ignore[no-any-return]

    vpc = [{"stack": "network", "outputs": [{"output": "vpc_id", "variable": "vpc_id"}]}]
    result = (await gql(SET, org=t.org, stack="cluster", deps=vpc))["setStackDependencies"]
    assert result == {
        "__typename": "StackDependencies",
        "dependsOn": [{"stack": "network", "outputs": [{"output": "vpc_id", "variable": "vpc_id"}]}],
    }
    back = [{"stack": "cluster", "outputs": [{"output": "cluster_id", "variable": "c"}]}]
    result = (await gql(SET, org=t.org, stack="network", deps=back))["setStackDependencies"]
    assert result["__typename"] == "ConflictError" and result["code"] == "dependency_cycle"
    assert "cluster → network → cluster" in result["message"]
    missing = [{"stack": "nowhere", "outputs": [{"output": "a", "variable": "b"}]}]
    result = (await gql(SET, org=t.org, stack="app", deps=missing))["setStackDependencies"]
    assert result == {"__typename": "NotFoundError", "code": "not_found"}
    read = (await gql(GRAPH_QUERY, org=t.org))["organization"]
    assert [n["stack"] for n in read["dependencyGraph"]["nodes"]] == ["app", "cluster", "network"]
    assert read["dependencyGraph"]["edges"] == [
        {
            "upstream": "network",
            "downstream": "cluster",
            "outputs": [{"output": "vpc_id", "variable": "vpc_id"}],
        }
    ]
    assert read["stack"]["dependencies"] == {"dependsOn": [{"stack": "network"}], "dependents": []}
