"""A run's changes over GraphQL: counted per group, filtered and paged on the server, with cursors
that walk every match exactly once in the documented order; REST still sends them all."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import insert, update

from conftest import Tenant, make_stack
from firstlume.db.models import ResourceChange, Run
from firstlume.services.context import Context
from support.runs import start

ORG = "acme"
ORDER = ["DELETE", "REPLACE", "UPDATE", "CREATE"]
PAGE = """query($id: ID!, $first: Int!, $after: String, $action: ChangeAction, $type: String, $unit: String,
               $text: String) {
  organization(slug: "acme") { run(id: $id) {
    changes(first: $first, after: $after, action: $action, type: $type, unit: $unit, text: $text) {
      summary { delete replace update create text }
      totalCount counts { delete replace update create total } types units
      pageInfo { hasNextPage endCursor }
      groups { action count total changes { address } }
      nodes { address type unit action replacedBecause stages { action state }
              attributes { name before after forcesReplacement } }
    } } } }"""

TYPES = ["aws_instance", "aws_s3_bucket", "terraform_data"]
UNITS = [".", "modules/net"]
ACTIONS = ["create", "update", "delete", "replace", "create"]


def change(run_id: str, i: int) -> dict[str, Any]:
    action = ACTIONS[i % len(ACTIONS)]
    resource_type = TYPES[i % len(TYPES)]
    # Names with LIKE's wildcards, so that a text filter must match them literally.
    name = f"r{i}" if i % 10 else f"odd_100%_{i}"
    return {
        "run_id": run_id, "position": i, "address": f"{resource_type}.{name}", "type": resource_type,
        "unit": UNITS[i % len(UNITS)], "action": action,
        "attributes": [{"name": "input", "before": i, "after": {"nested": [i, "(sensitive)"]}, "forces_replacement": action == "replace"}],
        "replaced_because": ["input"] if action == "replace" else [],
        "state": None, "error": None,
        "stages": [{"action": "delete", "state": None}, {"action": "create", "state": None}] if action == "replace" else [],
    }  # fmt: skip


@pytest.fixture
async def planned(ctx: Context, tenant: Tenant) -> tuple[str, list[dict[str, Any]]]:
    """A run with 103 changes of every action, three types and two units."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, ORG, "net", "apply")
    rows = [change(run_id, i) for i in range(103)]
    counts = {a: sum(1 for r in rows if r["action"] == a) for a in set(ACTIONS)}
    async with ctx.unit() as unit:
        await unit.session.execute(insert(ResourceChange), rows)
        await unit.session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(has_plan=True, **{f"summary_{a}": n for a, n in counts.items()})
        )
    return run_id, rows


def expected_order(rows: list[dict[str, Any]]) -> list[str]:
    return [
        r["address"] for r in sorted(rows, key=lambda r: (ORDER.index(r["action"].upper()), r["position"]))
    ]


async def page(client: httpx.AsyncClient, tenant: Tenant, run_id: str, **arguments: Any) -> dict[str, Any]:
    body = (
        await client.post(
            "/graphql", json={"query": PAGE, "variables": {"id": run_id, **arguments}}, headers=tenant.headers
        )
    ).json()
    assert not body.get("errors"), body["errors"]
    return body["data"]["organization"]["run"]["changes"]  # type: ignore[no-any-return]


async def walk(
    client: httpx.AsyncClient, tenant: Tenant, run_id: str, **filters: Any
) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    after = None
    while True:
        current = await page(client, tenant, run_id, first=7, after=after, **filters)
        pages.append(current)
        if not current["pageInfo"]["hasNextPage"]:
            return pages
        after = current["pageInfo"]["endCursor"]
        assert after is not None


async def test_pages_walk_every_change_once_in_group_then_plan_order(
    client: httpx.AsyncClient, tenant: Tenant, planned: tuple[str, list[dict[str, Any]]]
) -> None:
    run_id, rows = planned
    pages = await walk(client, tenant, run_id)
    walked = [c["address"] for p in pages for c in p["nodes"]]
    assert walked == expected_order(rows)
    assert [len(p["nodes"]) for p in pages] == [7] * 14 + [5]
    last = pages[-1]
    assert last["pageInfo"] == {"hasNextPage": False, "endCursor": last["pageInfo"]["endCursor"]}
    # Counts are for the whole set, on every page; the groups hold each page's own changes.
    for current in pages:
        assert current["totalCount"] == 103
        assert current["counts"] == {"delete": 21, "replace": 20, "update": 21, "create": 41, "total": 103}
        assert [(g["action"], g["count"], g["total"]) for g in current["groups"]] == [
            ("DELETE", 21, 21), ("REPLACE", 20, 20), ("UPDATE", 21, 21), ("CREATE", 41, 41),
        ]  # fmt: skip
        assert [c["address"] for g in current["groups"] for c in g["changes"]] == [
            c["address"] for c in current["nodes"]
        ]
    assert pages[0]["summary"]["text"] == "21 delete · 20 replace · 21 update · 41 create"
    assert pages[0]["types"] == TYPES and pages[0]["units"] == UNITS
    # A page past the end is empty, and says so.
    beyond = await page(client, tenant, run_id, first=5, after=last["pageInfo"]["endCursor"])
    assert beyond["nodes"] == [] and beyond["pageInfo"] == {"hasNextPage": False, "endCursor": None}


async def test_each_filter_narrows_pages_and_counts_but_not_the_totals(
    client: httpx.AsyncClient, tenant: Tenant, planned: tuple[str, list[dict[str, Any]]]
) -> None:
    run_id, rows = planned
    cases: list[tuple[dict[str, Any], Any]] = [
        ({"action": "REPLACE"}, lambda r: r["action"] == "replace"),
        ({"type": "aws_s3_bucket"}, lambda r: r["type"] == "aws_s3_bucket"),
        ({"unit": "modules/net"}, lambda r: r["unit"] == "modules/net"),
        # Case-insensitive, and % and _ match themselves only.
        ({"text": "ODD_100%"}, lambda r: "odd_100%" in r["address"]),
        ({"text": "r1"}, lambda r: "r1" in r["address"]),
        (
            {"action": "CREATE", "type": "terraform_data", "unit": ".", "text": "r"},
            lambda r: r["action"] == "create" and r["type"] == "terraform_data" and r["unit"] == "." and "r" in r["address"],
        ),
        ({"type": "no_such_type"}, lambda r: False),
    ]  # fmt: skip
    for filters, keep in cases:
        matching = [r for r in rows if keep(r)]
        pages = await walk(client, tenant, run_id, **filters)
        assert [c["address"] for p in pages for c in p["nodes"]] == expected_order(matching), filters
        counts = {a.lower(): sum(1 for r in matching if r["action"] == a.lower()) for a in ORDER}
        assert pages[0]["counts"] == {**counts, "total": len(matching)}, filters
        assert pages[0]["totalCount"] == len(matching)
        assert [g["total"] for g in pages[0]["groups"]] == [21, 20, 21, 41]
        assert pages[0]["types"] == TYPES and pages[0]["units"] == UNITS
    assert len([r for r in rows if "odd_100%" in r["address"]]) == 11


async def test_a_change_on_a_page_carries_all_its_data(
    client: httpx.AsyncClient, tenant: Tenant, planned: tuple[str, list[dict[str, Any]]]
) -> None:
    run_id, rows = planned
    [replaced] = (await page(client, tenant, run_id, first=1, action="REPLACE"))["nodes"]
    row = rows[3]
    assert replaced == {
        "address": row["address"], "type": row["type"], "unit": row["unit"], "action": "REPLACE",
        "replacedBecause": ["input"], "stages": [{"action": "DELETE", "state": None}, {"action": "CREATE", "state": None}],
        "attributes": [{"name": "input", "before": 3, "after": {"nested": [3, "(sensitive)"]}, "forcesReplacement": True}],
    }  # fmt: skip
    [created] = (await page(client, tenant, run_id, first=1, action="CREATE"))["nodes"]
    assert created["replacedBecause"] == [] and created["stages"] == []


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"first": 0}, "first"),
        ({"first": -3}, "first"),
        ({"first": 10_001}, "first"),
        ({"first": 5, "after": "nope"}, "after"),
        ({"first": 5, "after": "4.1"}, "after"),
        ({"first": 5, "after": "1."}, "after"),
        ({"first": 5, "after": "1.12345678901"}, "after"),
        ({"first": 5, "text": "x" * 1001}, "text"),
    ],
)
async def test_bad_page_arguments_are_refused_with_the_argument_named(
    client: httpx.AsyncClient,
    tenant: Tenant,
    planned: tuple[str, list[dict[str, Any]]],
    arguments: dict[str, Any],
    field: str,
) -> None:
    run_id, _ = planned
    response = await client.post(
        "/graphql", json={"query": PAGE, "variables": {"id": run_id, **arguments}}, headers=tenant.headers
    )
    body = response.json()
    assert response.status_code == 200 and "Traceback" not in response.text
    [error] = body["errors"]
    assert error["extensions"]["code"] == "invalid_request" and error["extensions"]["field"] == field
    assert f"'{field}'" in error["message"]


async def test_several_runs_page_their_changes_in_one_query(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, planned: tuple[str, list[dict[str, Any]]]
) -> None:
    run_id, rows = planned
    other = await start(ctx, tenant.token, ORG, "net", "plan")
    async with ctx.unit() as unit:
        await unit.session.execute(insert(ResourceChange), [change(other, i) for i in range(4)])
    query = """{ organization(slug: "acme") { stack(slug: "net") { runs(first: 5) { nodes { id
        changes(first: 3, action: DELETE) { totalCount nodes { address } pageInfo { hasNextPage } } } } } } }"""
    body = (await client.post("/graphql", json={"query": query}, headers=tenant.headers)).json()
    assert not body.get("errors"), body["errors"]
    by_run = {n["id"]: n["changes"] for n in body["data"]["organization"]["stack"]["runs"]["nodes"]}
    deletes = [r["address"] for r in rows if r["action"] == "delete"]
    assert by_run[run_id] == {
        "totalCount": 21, "nodes": [{"address": a} for a in deletes[:3]], "pageInfo": {"hasNextPage": True},
    }  # fmt: skip
    assert by_run[other] == {
        "totalCount": 1, "nodes": [{"address": "terraform_data.r2"}], "pageInfo": {"hasNextPage": False},
    }  # fmt: skip


async def test_rest_sends_every_change_in_the_documented_shape(
    client: httpx.AsyncClient, tenant: Tenant, planned: tuple[str, list[dict[str, Any]]]
) -> None:
    run_id, rows = planned
    response = await client.get(f"/api/v1/orgs/acme/runs/{run_id}/changes", headers=tenant.headers)
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    body = response.json()

    def documented(row: dict[str, Any]) -> dict[str, Any]:
        item = {k: row[k] for k in ("address", "type", "unit", "action", "attributes", "state", "error")}
        if row["action"] == "replace":
            item |= {"replaced_because": row["replaced_because"], "stages": row["stages"]}
        return item

    titles = ["Will be deleted", "Will be replaced", "Will be updated", "Will be created"]
    by_action = {
        a: [documented(r) for r in rows if r["action"] == a]
        for a in ("delete", "replace", "update", "create")
    }
    assert body == {
        "summary": {"delete": 21, "replace": 20, "update": 21, "create": 41},
        "summary_text": "21 delete · 20 replace · 21 update · 41 create",
        "groups": [
            {"action": action, "title": title, "count": len(by_action[action]), "changes": by_action[action]}
            for action, title in zip(by_action, titles, strict=True)
        ],
        "outputs": [],  # this plan changes no output (docs/rest-api.md: Changes)
    }
