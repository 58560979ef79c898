"""GraphQL reads the changes of a plan the real terraform made, grouped in the documented order."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from conftest import Tenant
from firstlume.services.context import Context
from support.runs import plan_run, start
from test_graphql_api import ORG, stack  # noqa: F401 (stack: the fixture, shared with the in-process tests)


async def test_changes_of_a_real_plan_are_grouped_in_the_documented_order(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str, main_plan: dict[str, Any]
) -> None:
    from support.scenarios import SECRET_NEW, SECRET_OLD

    run_id = await start(ctx, tenant.token, ORG, stack, "apply")
    assert await plan_run(ctx, main_plan) == {run_id: "awaiting_approval"}
    response = await client.post(
        "/graphql",
        json={
            "query": """query($id: ID!) { organization(slug: "acme") { run(id: $id) { changes {
                summary { delete replace update create text }
                groups { action title count changes { address type unit action state error replacedBecause
                         stages { action state } attributes { name before after forcesReplacement } } } } } } }""",
            "variables": {"id": run_id},
        },
        headers=tenant.headers,
    )
    changes = response.json()["data"]["organization"]["run"]["changes"]
    assert changes["summary"] == {"delete": 1, "replace": 1, "update": 2, "create": 2,
                                  "text": "1 delete · 1 replace · 2 update · 2 create"}  # fmt: skip
    assert [(g["action"], g["title"], g["count"]) for g in changes["groups"]] == [
        ("DELETE", "Will be deleted", 1), ("REPLACE", "Will be replaced", 1),
        ("UPDATE", "Will be updated", 2), ("CREATE", "Will be created", 2),
    ]  # fmt: skip
    by_address = {c["address"]: c for g in changes["groups"] for c in g["changes"]}
    repl = by_address["terraform_data.repl"]
    assert repl["replacedBecause"] == ["triggers_replace"]
    assert [s["action"] for s in repl["stages"]] == ["DELETE", "CREATE"]
    assert [a["name"] for a in repl["attributes"] if a["forcesReplacement"]] == ["triggers_replace"]
    assert (
        by_address["terraform_data.upd1"]["replacedBecause"] == []
        and by_address["terraform_data.upd1"]["stages"] == []
    )
    upd2 = {a["name"]: a for a in by_address["terraform_data.upd2"]["attributes"]}
    assert upd2["input"]["after"] == {"name": "y", "secret": "(sensitive value changed)"}
    assert {a["name"]: a["after"] for a in by_address["terraform_data.new1"]["attributes"]}[
        "input"
    ] == "(sensitive)"
    assert {c["state"] for c in by_address.values()} == {None}
    assert SECRET_NEW not in response.text and SECRET_OLD not in response.text


@pytest.fixture(scope="module")
def main_plan(tmp_path_factory: pytest.TempPathFactory, terraform_binary: str) -> dict[str, Any]:
    from support.scenarios import MAIN_AFTER, MAIN_BEFORE, two_step_plan

    tmp = tmp_path_factory.mktemp("graphql-plan")
    return two_step_plan(tmp / "stack", tmp, MAIN_BEFORE, MAIN_AFTER)
