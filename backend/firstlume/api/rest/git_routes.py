"""Git-driven runs over REST: the organization's webhook URL, its secret, the delivery log, and
PATCH of a stack (whose `trigger` says what a push starts)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import check_query, context_of, endpoint, int_param, json_body
from firstlume.api.rest.org_routes import org_read, org_request
from firstlume.api.rest.pull_request_routes import feedback_json
from firstlume.api.rest.serializers import iso, stack_json
from firstlume.api.validation import command
from firstlume.domain.errors import PayloadTooLarge
from firstlume.services import catalog
from firstlume.services.commands import RotateWebhookSecret, UpdateStack
from firstlume.services.git import deliveries as webhook
from firstlume.services.git.polling import set_baseline
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads import git as git_reads
from firstlume.services.reads import pull_requests as pull_request_reads

# Push payloads are far smaller; the cap is checked before the body is read whole.
MAX_WEBHOOK_BYTES = 5 * 1024 * 1024


async def capped_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    too_large = PayloadTooLarge(f"The webhook body is larger than {limit // (1024 * 1024)} MiB.")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


@endpoint
async def receive_webhook(request: Request) -> Response:
    check_query(request)
    body = await capped_body(request, MAX_WEBHOOK_BYTES)
    answer = await webhook.receive(context_of(request), request.path_params["org"], request.headers, body)
    return JSONResponse(answer)


@endpoint
async def rotate_webhook_secret(request: Request) -> Response:
    body = await json_body(request)
    command(RotateWebhookSecret, body)
    ctx = context_of(request)
    async with org_request(request) as (unit, _, org):
        secret = await webhook.rotate_secret(unit, ctx.keyring, org)
    return JSONResponse({"secret": secret}, status_code=201)


def delivery_json(delivery: git_reads.GitDeliveryRecord) -> dict[str, Any]:
    return {
        "id": str(delivery.id),
        "received_at": iso(delivery.received_at),
        "source": delivery.source,
        "delivery": delivery.delivery,
        "event": delivery.event,
        "repository": delivery.repository,
        "ref": delivery.ref,
        "head": delivery.head,
        "http_status": delivery.http_status,
        "result": delivery.result,
    }


@endpoint
async def list_deliveries(request: Request) -> Response:
    async with org_read(request, "limit") as (session, _, org):
        limit = int_param(request, "limit", git_reads.MAX_DELIVERIES, 1, git_reads.MAX_DELIVERIES)
        rows = await git_reads.deliveries(session, org.id, limit or git_reads.MAX_DELIVERIES)
        rotated = await git_reads.secret_rotated_at(session, org.id)
        sent = await pull_request_reads.feedback(session, org.id)
        return JSONResponse(
            {
                "deliveries": [delivery_json(d) for d in rows],
                "webhook_secret_set_at": iso(rotated) if rotated else None,
                # Commit statuses and pull request comments sent to Git hosts, with their answers.
                "feedback": [feedback_json(f) for f in sent],
            }
        )


@endpoint
async def update_stack(request: Request) -> Response:
    body = await json_body(request)
    ctx = context_of(request)
    async with org_request(request) as (unit, _, org):
        check_query(request)
        stack, rebase = await catalog.update_stack(
            unit.session, ctx.keyring, org, request.path_params["stack"], command(UpdateStack, body)
        )
        paths = await catalog_reads.folder_paths(unit.session, [stack])
    if rebase:
        # Only commits after the branch's head now start runs.
        await set_baseline(ctx, stack.id)
    return JSONResponse(stack_json(stack, paths.get(stack.folder_id or "")))


O = "/api/v1/orgs/{org}"

routes = [
    Route(f"{O}/git/webhook", receive_webhook, name="git.webhook", methods=["POST"]),
    Route(f"{O}/git/webhook-secret", rotate_webhook_secret, name="git.rotate_secret", methods=["POST"]),
    Route(f"{O}/git/deliveries", list_deliveries, name="git.deliveries", methods=["GET"]),
    Route(f"{O}/stacks/{{stack}}", update_stack, name="stacks.update", methods=["PATCH"]),
]
