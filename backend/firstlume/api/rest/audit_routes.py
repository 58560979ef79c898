"""The audit trail: `GET $O/audit`, newest first, filtered, a page at a time."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import endpoint, int_param, query_values
from firstlume.api.rest.org_routes import org_read
from firstlume.api.rest.serializers import iso
from firstlume.services.reads import audit as audit_reads
from firstlume.services.reads.audit import AuditRecord

FILTERS = ("actor", "action", "target", "stack", "since", "until")


def audit_entry_json(entry: AuditRecord) -> dict[str, Any]:
    return {
        "id": str(entry.id),
        "time": iso(entry.created_at),
        "actor": entry.actor,
        "token": entry.actor_token_id,
        "action": entry.action,
        "target": entry.target,
        "stack": entry.stack,
        "details": entry.details,
        "via": entry.via,
        "request_id": entry.request_id,
    }


@endpoint
async def list_audit(request: Request) -> Response:
    async with org_read(request, *FILTERS, "limit", "cursor") as (session, _, org):
        params = request.query_params
        where = audit_reads.parse_filter(
            actors=query_values(request, "actor"),
            actions=query_values(request, "action"),
            targets=params.getlist("target"),
            stacks=query_values(request, "stack"),
            since=params.get("since"),
            until=params.get("until"),
        )
        limit = int_param(request, "limit", audit_reads.DEFAULT_PAGE, 1, audit_reads.MAX_PAGE)
        assert limit is not None
        before = audit_reads.parse_cursor(params.get("cursor"))
        page = await audit_reads.audit_page(session, org.id, where, limit, before)
        return JSONResponse(
            {"entries": [audit_entry_json(e) for e in page.entries], "next_cursor": page.next_cursor}
        )


routes = [Route("/api/v1/orgs/{org}/audit", list_audit, name="audit.list", methods=["GET"])]
