"""Stack dependencies and the organization's dependency graph (adoption-api.md, section 9)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import endpoint, json_body
from firstlume.api.rest.org_routes import org_read, stack_request
from firstlume.api.validation import command
from firstlume.services import catalog
from firstlume.services.commands import SetDependencies
from firstlume.services.dependencies import config
from firstlume.services.reads import Session
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord

O = "/api/v1/orgs/{org}"


def _edge_json(edge: config.Edge, *, other: str) -> dict[str, Any]:
    return {"stack": other, "outputs": dict(edge.outputs)}


async def _dependencies_json(session: Session, org: OrganizationRecord, stack: StackRecord) -> dict[str, Any]:
    found = await config.stack_dependencies(session, org.id, stack.slug)
    return {
        "stack": stack.slug,
        "depends_on": [_edge_json(e, other=e.upstream) for e in found.depends_on],
        "dependents": [_edge_json(e, other=e.stack) for e in found.dependents],
    }


@endpoint
async def get_dependencies(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        stack = await catalog.stack_by_slug(session, org, request.path_params["stack"])
        return JSONResponse(await _dependencies_json(session, org, stack))


@endpoint
async def put_dependencies(request: Request) -> Response:
    body = await json_body(request)
    async with stack_request(request) as (unit, actor, org, stack):
        await config.set_dependencies(unit, actor, org, stack, command(SetDependencies, body))
        payload = await _dependencies_json(unit.session, org, stack)
    return JSONResponse(payload)


@endpoint
async def dependency_graph(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        graph = await config.dependency_graph(session, org.id)
        return JSONResponse(
            {
                "nodes": [
                    {
                        "stack": n.stack,
                        "name": n.name,
                        "last_run": {"id": n.last_run_id, "status": n.last_run_status}
                        if n.last_run_id
                        else None,
                    }
                    for n in graph.nodes
                ],
                "edges": [
                    {"from": e.upstream, "to": e.stack, "outputs": dict(e.outputs)} for e in graph.edges
                ],
            }
        )


routes = [
    Route(f"{O}/stacks/{{stack}}/dependencies", get_dependencies, name="dependencies.get", methods=["GET"]),
    Route(f"{O}/stacks/{{stack}}/dependencies", put_dependencies, name="dependencies.put", methods=["PUT"]),
    Route(f"{O}/dependency-graph", dependency_graph, name="dependencies.graph", methods=["GET"]),
]
