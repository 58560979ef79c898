"""A plan upload holds off the collector's young collections (collector.py): the plan's objects
are not walked again and again while they are alive, and are freed before collections resume."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import Tenant, make_stack
from firstlume.collector import DEFERRED_THRESHOLD, young_collections_deferred
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.runs import start

# Above what a request leaves alive (SQLAlchemy's statement caches, ~8,000 objects in a new
# app), below what a plan of 5,000 resources makes (~45,000 dicts and lists to read it).
SMALL = 20_000


@pytest.fixture
def small_threshold() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(SMALL, *before[1:])
    yield
    gc.set_threshold(*before)


@pytest.fixture
def young_collections() -> Iterator[list[int]]:
    """How many young collections ran, as they happen."""
    seen: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info["generation"] == 0:
            seen.append(1)

    gc.callbacks.append(count)
    yield seen
    gc.callbacks.remove(count)


def plan_of(count: int) -> dict[str, Any]:
    return {
        "format_version": "1.2",
        "resource_changes": [
            {
                "address": f"terraform_data.r[{i}]",
                "mode": "managed",
                "type": "terraform_data",
                "change": {
                    "actions": ["update"],
                    "before": {"input": {"a": [i, {"b": "x"}]}, "tags": {"n": str(i)}},
                    "after": {"input": {"a": [i + 1, {"b": "y"}]}, "tags": {"n": str(i)}},
                    "after_unknown": {},
                },
            }
            for i in range(count)
        ],
    }


def test_deferrals_overlap_and_the_last_to_end_restores_the_threshold(small_threshold: None) -> None:
    served = gc.get_threshold()
    with young_collections_deferred():
        assert gc.get_threshold() == (DEFERRED_THRESHOLD, *served[1:])
        with pytest.raises(RuntimeError), young_collections_deferred():
            raise RuntimeError("an upload that failed")
        assert gc.get_threshold()[0] == DEFERRED_THRESHOLD  # the first still holds it
    assert gc.get_threshold() == served


async def test_an_upload_runs_no_young_collection_and_frees_its_plan_before_they_resume(
    client: httpx.AsyncClient,
    ctx: Context,
    tenant: Tenant,
    small_threshold: None,
    young_collections: list[int],
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    await start(ctx, tenant.token, tenant.org, "net", "plan")
    [launch] = await dispatch.claim_plans(ctx)
    body = json.dumps({"plan_file_b64": "cGxhbg==", "plan_json": plan_of(5_000), "variables": []})
    # Reading the body alone, outside an upload, runs young collections at this threshold.
    json.loads(body)
    assert len(young_collections) >= 2, "the plan is too small to show anything"
    gc.collect()  # from an empty young generation: the request does little before its route
    young_collections.clear()

    uploaded = await client.post(
        "/api/v1/executor/plan", headers={"Authorization": f"Bearer {launch.token}"}, content=body
    )

    assert uploaded.status_code == 200, uploaded.text
    assert uploaded.json()["summary"]["update"] == 5_000
    assert young_collections == []
    assert gc.get_threshold()[0] == SMALL
    # The plan's objects were freed before the threshold came back, not left to the next
    # collection to walk.
    assert gc.get_count()[0] < SMALL, gc.get_count()
