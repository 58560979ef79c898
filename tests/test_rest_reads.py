"""REST reads: run history filtered and paged by query parameters (unknown ones refused, never
ignored), a run's duration without its queue time, and the whole log however long it is."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import insert, select, update

from conftest import Tenant, make_stack
from firstlume.db.models import LogChunk, Run, RunStep
from firstlume.db.types import utcnow
from firstlume.services import dispatch
from firstlume.services.context import Context
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads.rows import field_names
from firstlume.services.reads.runs import RunFilter, RunPageKey, RunRecord, StepRecord
from support.runs import start

O = "/api/v1/orgs/acme"


@pytest.fixture
async def history(ctx: Context, tenant: Tenant) -> dict[int, tuple[str, str]]:
    """Twelve runs of `net`, number → (type, status): the older ones finished, the newest queued."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    kinds = ["plan", "apply", "destroy", "drift"]
    finished = ["applied", "failed", "planned", "canceled", "discarded", "no_changes", "drifted", "failed"]
    runs: dict[int, tuple[str, str]] = {}
    for number in range(1, 13):
        run_id = await start(ctx, tenant.token, "acme", "net", kinds[number % 4])
        status = finished[number - 1] if number <= len(finished) else "queued"
        if status != "queued":
            async with ctx.unit() as unit:
                await unit.session.execute(update(Run).where(Run.id == run_id).values(status=status))
        runs[number] = (kinds[number % 4], status)
    return runs


async def listed(client: httpx.AsyncClient, tenant: Tenant, query: str) -> list[int]:
    response = await client.get(f"{O}/stacks/net/runs{query}", headers=tenant.headers)
    assert response.status_code == 200, response.text
    return [r["number"] for r in response.json()["runs"]]


async def test_stack_runs_are_filtered_by_status_and_type_and_paged_by_number(
    client: httpx.AsyncClient, tenant: Tenant, history: dict[int, tuple[str, str]]
) -> None:
    newest_first = sorted(history, reverse=True)
    assert await listed(client, tenant, "") == newest_first
    assert await listed(client, tenant, "?status=failed") == [8, 2]
    assert await listed(client, tenant, "?status=failed,queued") == [12, 11, 10, 9, 8, 2]
    assert await listed(client, tenant, "?status=failed&status=planned") == [8, 3, 2]
    assert await listed(client, tenant, "?type=apply") == [
        n for n in newest_first if history[n][0] == "apply"
    ]
    assert await listed(client, tenant, "?type=plan&status=queued") == [12]
    assert await listed(client, tenant, "?limit=5") == newest_first[:5]
    assert await listed(client, tenant, "?limit=5&before=8") == [7, 6, 5, 4, 3]
    assert await listed(client, tenant, "?limit=5&before=3") == [2, 1]
    assert await listed(client, tenant, "?status=failed&before=8") == [2]
    # Paging by the last number seen walks the whole history once.
    seen: list[int] = []
    query = "?limit=4"
    while page := await listed(client, tenant, query):
        seen += page
        query = f"?limit=4&before={page[-1]}"
    assert seen == newest_first


async def test_active_runs_are_filtered_by_status_and_type(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, history: dict[int, tuple[str, str]]
) -> None:
    await dispatch.claim_plans(ctx)  # run 9 starts planning; 10 to 12 stay queued
    response = await client.get(f"{O}/runs?active=true&status=queued", headers=tenant.headers)
    assert [(r["number"], r["queue_position"]) for r in response.json()["runs"]] == [
        (10, 1),
        (11, 2),
        (12, 3),
    ]
    response = await client.get(f"{O}/runs?type=apply", headers=tenant.headers)
    assert [r["number"] for r in response.json()["runs"]] == [9]
    response = await client.get(f"{O}/runs?status=failed", headers=tenant.headers)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "status" and "finished" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/stacks/net/runs?stauts=failed", "stauts"),
        ("/stacks/net/runs?status=failed&page=2", "page"),
        ("/runs?active=true&stack=net", "stack"),
        ("/stacks?folder=prod", "folder"),
        ("/stacks/net?expand=runs", "expand"),
        ("/folders?depth=1", "depth"),
        ("/variables?sensitive=true", "sensitive"),
        ("/settings?level=stack", "level"),
        ("/runs/RUN?fields=id", "fields"),
        ("/runs/RUN/changes?action=delete", "action"),
        ("/runs/RUN/logs?from=10", "from"),
    ],
)
async def test_unknown_query_parameters_are_refused_naming_them(
    client: httpx.AsyncClient,
    ctx: Context,
    tenant: Tenant,
    history: dict[int, tuple[str, str]],
    path: str,
    parameter: str,
) -> None:
    response = await client.get(f"{O}/stacks/net/runs?limit=1", headers=tenant.headers)
    run_id = response.json()["runs"][0]["id"]
    response = await client.get(O + path.replace("RUN", run_id), headers=tenant.headers)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["field"] == parameter
    assert f"'{parameter}'" in error["message"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?status=stuck", "status"),
        ("?status=failed,,nope", "status"),
        ("?type=deploy", "type"),
        ("?limit=0", "limit"),
        ("?limit=501", "limit"),
        ("?before=soon", "before"),
        ("?before=0", "before"),
    ],
)
async def test_bad_filter_values_are_refused(
    client: httpx.AsyncClient, tenant: Tenant, history: dict[int, tuple[str, str]], query: str, field: str
) -> None:
    response = await client.get(f"{O}/stacks/net/runs{query}", headers=tenant.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


async def test_a_runs_duration_starts_with_its_first_phase_not_its_arrival(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, "acme", "net", "plan")
    queued = (await client.get(f"{O}/runs/{run_id}", headers=tenant.headers)).json()
    assert (queued["started_at"], queued["duration_ms"]) == (None, None)
    canceled = (await client.post(f"{O}/runs/{run_id}/cancel", headers=tenant.headers)).json()
    # Canceled while queued: it never started, so it took no time at all.
    assert canceled["finished_at"] is not None and (canceled["started_at"], canceled["duration_ms"]) == (
        None,
        None,
    )


# The whole log -------------------------------------------------------------------------------


async def test_the_whole_log_is_returned_however_many_chunks_it_has(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, "acme", "net", "plan")
    chunks: list[dict[str, Any]] = []
    offset = 0
    for i in range(12_001):
        step = "init" if i < 6_000 else "plan"
        text = f"{step} line {i}\n"
        chunks.append({"run_id": run_id, "offset": offset, "step": step, "text": text})
        offset += len(text)
    async with ctx.unit() as unit:
        await unit.session.execute(insert(LogChunk), chunks)
        await unit.session.execute(
            insert(RunStep),
            [
                {"run_id": run_id, "name": n, "position": i, "status": "done"}
                for i, n in enumerate(("init", "plan"))
            ],
        )
        await unit.session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(log_length=offset, status="failed", finished_at=utcnow())
        )
    whole = await client.get(f"{O}/runs/{run_id}/logs", headers=tenant.headers)
    assert whole.status_code == 200 and whole.headers["content-type"].startswith("text/plain")
    assert whole.text == "".join(c["text"] for c in chunks)
    plan = await client.get(f"{O}/runs/{run_id}/logs?step=plan", headers=tenant.headers)
    assert plan.text == "".join(c["text"] for c in chunks if c["step"] == "plan")
    followed = await client.get(f"{O}/runs/{run_id}/logs?follow=true", headers=tenant.headers)
    assert followed.text == whole.text


async def test_pages_of_runs_are_read_models_of_their_runs_and_no_orm_object(
    ctx: Context, history: dict[int, tuple[str, str]]
) -> None:
    # Pages of runs (one stack's, several stacks' at once) are read as read models (RunRecord),
    # not ORM objects, which cost about a fifth of a stack page's server time: nothing enters the
    # session's identity map, and each record holds its run's values.
    async with ctx.db.read() as session:
        stack_id = await session.scalar(select(Run.stack_id).limit(1))
        assert stack_id is not None
        keys = [RunPageKey(stack_id, 5, None, RunFilter()), RunPageKey(stack_id, 3, 8, RunFilter())]
        alone = await run_reads.stack_runs(session, keys[:1], run_reads.PageExtras())
        together = await run_reads.stack_runs(
            session, [*keys, RunPageKey("no-such-stack", 5, None, RunFilter())]
        )
        assert not [obj for obj in session.identity_map.values() if isinstance(obj, Run)]
        assert [r.number for r in alone[0]] == [12, 11, 10, 9, 8]
        assert [[r.number for r in page] for page in together] == [[12, 11, 10, 9, 8], [7, 6, 5], []]
        records = {r.id: r for r in alone[0] + together[1]}
        stored = (await session.scalars(select(Run).where(Run.id.in_(records)))).all()
        columns = field_names(RunRecord)
        assert len(stored) == 8
        for run in stored:
            assert isinstance(records[run.id], RunRecord)
            assert {c: getattr(records[run.id], c) for c in columns} == {c: getattr(run, c) for c in columns}


async def test_a_run_and_its_steps_are_read_for_a_get_as_read_models(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    # A GET of a run reads it and its steps as read models too (services/reads/runs.py
    # details_in_org): no ORM object, their values as stored, the steps in order, and a run
    # without steps (its outer join's row of nulls) has none.
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    stepped = await start(ctx, tenant.token, "acme", "net", "plan")
    bare = await start(ctx, tenant.token, "acme", "net", "plan")
    started = utcnow()
    async with ctx.unit() as unit:
        await unit.session.execute(
            insert(RunStep),
            [
                {"run_id": stepped, "name": n, "position": i, "status": "done", "started_at": started}
                for i, n in enumerate(("checkout", "init", "plan"))
            ],
        )
    async with ctx.db.read() as session:
        org_id = await session.scalar(select(Run.org_id).where(Run.id == stepped))
        assert org_id is not None
        details = await run_reads.details_in_org(session, org_id, stepped)
        without = await run_reads.details_in_org(session, org_id, bare)
        assert details is not None and without is not None
        assert not list(session.identity_map.values())
        assert [s.name for s in details.steps] == ["checkout", "init", "plan"] and without.steps == []
        assert (details.stack_slug, details.created_by, details.queue_position) == ("net", tenant.email, 1)
        stored = await session.get(Run, stepped)
        steps = (
            await session.scalars(select(RunStep).where(RunStep.run_id == stepped).order_by(RunStep.position))
        ).all()
        runs_columns = field_names(RunRecord)
        step_columns = field_names(StepRecord)
        assert {c: getattr(details.run, c) for c in runs_columns} == {
            c: getattr(stored, c) for c in runs_columns
        }
        assert [{c: getattr(s, c) for c in step_columns} for s in details.steps] == [
            {c: getattr(s, c) for c in step_columns} for s in steps
        ]
    shown = (await client.get(f"{O}/runs/{stepped}", headers=tenant.headers)).json()
    assert [s["name"] for s in shown["steps"]] == ["checkout", "init", "plan"]
    assert shown["started_at"] is not None and shown["queue_position"] == 1
