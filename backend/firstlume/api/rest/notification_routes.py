"""Notification destinations, their delivery history and a test message (platform-api.md,
section 4). The signing secret is write-only: responses say only whether there is one."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import context_of, endpoint, int_param, json_body
from firstlume.api.rest.org_routes import org_read, org_request
from firstlume.api.rest.serializers import iso
from firstlume.api.validation import command
from firstlume.domain.drift import DeliveryStatus
from firstlume.domain.errors import NotFound
from firstlume.services.commands import CreateNotification, PatchNotification
from firstlume.services.notifications import destinations
from firstlume.services.notifications.sender import send_test_delivery
from firstlume.services.reads import Session
from firstlume.services.reads import notifications as notification_reads
from firstlume.services.reads.notifications import DeliveryRecord, DestinationRecord

O = "/api/v1/orgs/{org}"
WAITING = (DeliveryStatus.PENDING, DeliveryStatus.RETRYING)


def destination_json(d: DestinationRecord) -> dict[str, Any]:
    return {
        "id": d.id,
        "name": d.name,
        "url": d.url,
        "events": list(d.events),
        "format": d.format,
        "folder": d.folder,
        "stack": d.stack,
        "has_secret": d.has_secret,
        "created_at": iso(d.created_at),
        "updated_at": iso(d.updated_at),
    }


def delivery_json(d: DeliveryRecord) -> dict[str, Any]:
    return {
        "id": d.id,
        "event": d.event,
        "run_id": d.run_id,
        "test": d.test,
        "status": d.status.value,
        "created_at": iso(d.created_at),
        "delivered_at": iso(d.delivered_at),
        "next_attempt_at": iso(d.next_attempt_at) if d.status in WAITING else None,
        "attempts": [
            {
                "number": a.number,
                "at": iso(a.at),
                "status_code": a.status_code,
                "duration_ms": a.duration_ms,
                "error": a.error,
            }
            for a in d.attempts
        ],
    }


async def _one(session: Session, org_id: str, destination_id: str) -> dict[str, Any]:
    found = (
        await notification_reads.destinations(session, org_id, [destination_id])
        if len(destination_id) <= 64
        else []
    )
    if not found:
        raise NotFound(f"No notification destination '{destination_id}' in this organization.")
    return destination_json(found[0])


@endpoint
async def list_destinations(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        views = await notification_reads.destinations(session, org.id)
        return JSONResponse({"notifications": [destination_json(v) for v in views]})


@endpoint
async def create_destination(request: Request) -> Response:
    body = await json_body(request)
    ctx = context_of(request)
    async with org_request(request) as (unit, _, org):
        created = await destinations.create_destination(
            unit.session,
            ctx.keyring,
            org,
            command(CreateNotification, body),
            allow_private=ctx.settings.allow_private_webhooks,
        )
        payload = await _one(unit.session, org.id, created)
    return JSONResponse(payload, status_code=201)


@endpoint
async def get_destination(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        return JSONResponse(await _one(session, org.id, request.path_params["id"]))


@endpoint
async def patch_destination(request: Request) -> Response:
    body = await json_body(request)
    ctx = context_of(request)
    destination_id = request.path_params["id"]
    async with org_request(request) as (unit, _, org):
        await destinations.patch_destination(
            unit.session,
            ctx.keyring,
            org,
            destination_id,
            command(PatchNotification, body),
            allow_private=ctx.settings.allow_private_webhooks,
        )
        payload = await _one(unit.session, org.id, destination_id)
    return JSONResponse(payload)


@endpoint
async def delete_destination(request: Request) -> Response:
    async with org_request(request) as (unit, _, org):
        await destinations.delete_destination(unit.session, org, request.path_params["id"])
    return Response(status_code=204)


@endpoint
async def list_deliveries(request: Request) -> Response:
    async with org_read(request, "limit") as (session, _, org):
        limit = int_param(request, "limit", 50, 1, 200)
        assert limit is not None
        destination_id = request.path_params["id"]
        await destinations.require_destination(session, org, destination_id)
        found = await notification_reads.deliveries(session, destination_id, limit=limit)
        return JSONResponse({"deliveries": [delivery_json(d) for d in found]})


@endpoint
async def send_test(request: Request) -> Response:
    """Posts a test message at once and answers with its delivery (one attempt, never retried)."""
    await json_body(request)
    ctx = context_of(request)
    async with org_request(request) as (unit, _, org):
        delivery_id = await destinations.add_test_delivery(unit.session, org, request.path_params["id"])
    await send_test_delivery(ctx, delivery_id)
    async with ctx.db.read() as session:
        delivery = await notification_reads.delivery(session, delivery_id)
    return JSONResponse(delivery_json(delivery))


routes = [
    Route(f"{O}/notifications", list_destinations, name="notifications.list", methods=["GET"]),
    Route(f"{O}/notifications", create_destination, name="notifications.create", methods=["POST"]),
    Route(f"{O}/notifications/{{id}}", get_destination, name="notifications.get", methods=["GET"]),
    Route(f"{O}/notifications/{{id}}", patch_destination, name="notifications.update", methods=["PATCH"]),
    Route(f"{O}/notifications/{{id}}", delete_destination, name="notifications.delete", methods=["DELETE"]),
    Route(
        f"{O}/notifications/{{id}}/deliveries",
        list_deliveries,
        name="notifications.deliveries",
        methods=["GET"],
    ),
    Route(f"{O}/notifications/{{id}}/test", send_test, name="notifications.test", methods=["POST"]),
]
