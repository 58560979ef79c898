"""Starting a run at a given commit (Retry: a new run of the same type at the same commit), by
REST and GraphQL: the plan checks out that commit, not the branch's tip; a malformed SHA, a
commit no run of the stack used, and a drift run with a commit are refused with a sentence, and
nothing is queued. Runs on SQLite and PostgreSQL (the suite's fixtures)."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import func, select, update

from conftest import Tenant, make_stack
from firstlume.db.models import Run
from firstlume.db.models_audit import AuditEntry
from firstlume.services import dispatch, phases
from firstlume.services.context import Context
from support.runs import start

ORG = "acme"
SHA = "ab12" * 10
OTHER = "cd34" * 10


async def _failed_run_at(ctx: Context, tenant: Tenant, commit: str) -> str:
    """A finished run of `web` that planned `commit` (as the executor would have reported)."""
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///nowhere"})
    run_id = await start(ctx, tenant.token, ORG, "web", "apply")
    async with ctx.unit() as unit:
        await unit.session.execute(
            update(Run).where(Run.id == run_id).values(status="failed", commit_sha=commit)
        )
    return run_id


async def _runs(ctx: Context) -> int:
    async with ctx.db.transaction() as session:
        return int(await session.scalar(select(func.count()).select_from(Run)) or 0)


async def test_a_run_started_at_a_commit_plans_that_commit(
    ctx: Context, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    await _failed_run_at(ctx, tenant, SHA)
    response = await client.post(
        f"/api/v1/orgs/{ORG}/stacks/web/runs", headers=tenant.headers, json={"type": "apply", "commit": SHA}
    )
    assert response.status_code == 201, response.text
    retry = response.json()
    assert retry["type"] == "apply" and retry["trigger"] == {
        "kind": "manual",
        "commit": SHA,
        "delivery": None,
    }
    # The plan's executor is told to check out that commit.
    [launch] = await dispatch.claim_plans(ctx)
    assert launch.run_id == retry["id"]
    assert (await phases.spec(ctx, launch.token)).commit_sha == SHA
    # The audit trail says which commit.
    async with ctx.db.transaction() as session:
        details = await session.scalar(
            select(AuditEntry.details).where(AuditEntry.target == f"run:{retry['id']}")
        )
    assert details is not None and details["commit"] == SHA


async def test_graphql_starts_a_run_at_a_commit(
    ctx: Context, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    await _failed_run_at(ctx, tenant, SHA)
    query = """mutation($commit: String) { startRun(org: "acme", stack: "web", type: PLAN, commit: $commit) {
        __typename ... on Run { type trigger { kind commit } } ... on InvalidInputError { message field } } }"""
    body = (
        await client.post(
            "/graphql", headers=tenant.headers, json={"query": query, "variables": {"commit": SHA}}
        )
    ).json()
    assert body["data"]["startRun"] == {
        "__typename": "Run",
        "type": "PLAN",
        "trigger": {"kind": "MANUAL", "commit": SHA},
    }
    body = (
        await client.post(
            "/graphql", headers=tenant.headers, json={"query": query, "variables": {"commit": OTHER}}
        )
    ).json()
    refused: dict[str, Any] = body["data"]["startRun"]
    assert refused["__typename"] == "InvalidInputError" and refused["field"] == "commit"
    assert "No run of this stack used commit" in refused["message"]


async def test_a_bad_or_unknown_commit_is_refused_and_nothing_is_queued(
    ctx: Context, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    await _failed_run_at(ctx, tenant, SHA)
    before = await _runs(ctx)
    url = f"/api/v1/orgs/{ORG}/stacks/web/runs"
    cases = [
        ({"type": "apply", "commit": "abc123"}, "must be a full commit SHA"),
        ({"type": "apply", "commit": SHA.upper()}, "must be a full commit SHA"),
        ({"type": "apply", "commit": 42}, "commit"),
        ({"type": "apply", "commit": OTHER}, "No run of this stack used commit cd34cd34cd34"),
        ({"type": "drift", "commit": SHA}, "A drift run checks the commit last applied"),
    ]
    for body, words in cases:
        response = await client.post(url, headers=tenant.headers, json=body)
        assert response.status_code == 422, (body, response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid_request", error
        assert words in error["message"], (body, error)
    assert await _runs(ctx) == before
    # Another organization's stack is not found, whatever the commit.
    other = await client.post(
        "/api/v1/orgs/elsewhere/stacks/web/runs",
        headers=tenant.headers,
        json={"type": "apply", "commit": SHA},
    )
    assert other.status_code == 404
