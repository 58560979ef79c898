"""Drift: the organization's fleet view and a stack's drift history (platform-api.md, section 3)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import endpoint, int_param
from firstlume.api.rest.org_routes import org_read
from firstlume.api.rest.serializers import iso
from firstlume.domain.drift import DRIFTED_FIELD
from firstlume.services import catalog
from firstlume.services.reads import drift as drift_reads
from firstlume.services.reads.runs import RunRecord

O = "/api/v1/orgs/{org}"


def _run_line(run: RunRecord | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "id": run.id,
        "number": run.number,
        "status": str(run.status),
        "trigger": str(run.trigger_kind),
        "created_at": iso(run.created_at),
        "finished_at": iso(run.finished_at),
        "error": run.error,
    }


def _resources(found: list[drift_reads.DriftedResource]) -> list[dict[str, str]]:
    return [{"address": r.address, "action": r.action} for r in found]


@endpoint
async def overview(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        lines = await drift_reads.overview(session, org.id)
        return JSONResponse(
            {
                "stacks": [
                    {
                        "stack": line.stack_slug,
                        "name": line.stack_name,
                        "status": line.status.value,
                        "since": iso(line.since),
                        "last_run": _run_line(line.last_run),
                        DRIFTED_FIELD: [r.address for r in line.drifted],
                        "resources": _resources(line.drifted),
                    }
                    for line in lines
                ]
            }
        )


@endpoint
async def stack_history(request: Request) -> Response:
    async with org_read(request, "limit", "before") as (session, _, org):
        limit = int_param(request, "limit", 50, 1, 200)
        before = int_param(request, "before", None, 1, 2**31 - 1)
        assert limit is not None
        stack = await catalog.stack_by_slug(session, org, request.path_params["stack"])
        found = await drift_reads.history(session, stack.id, limit=limit, before=before)
        return JSONResponse(
            {
                "stack": stack.slug,
                "runs": [
                    {
                        **(_run_line(item.run) or {}),
                        "drift": item.status.value,
                        DRIFTED_FIELD: [r.address for r in item.drifted],
                        "resources": _resources(item.drifted),
                    }
                    for item in found
                ],
            }
        )


routes = [
    Route(f"{O}/drift", overview, name="drift.overview", methods=["GET"]),
    Route(f"{O}/stacks/{{stack}}/drift", stack_history, name="drift.stack", methods=["GET"]),
]
