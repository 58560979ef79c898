"""The organization's webhook URL: identify the host, check the signature, read the push, and
hand it to pushes.handle; every delivery lands in the delivery log, refused ones included (and
for those, nothing else is stored)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from firstlume.crypto import KeyRing
from firstlume.db.models import Organization, Stack
from firstlume.db.models_git import GitDelivery, GitWebhookSecret
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import FirstlumeError, NotFound, UnknownRepository
from firstlume.domain.git import normalize_repository
from firstlume.protocol.events import GitDeliveryLogged
from firstlume.pubsub import org_git_channel
from firstlume.services import audit
from firstlume.services.context import Context, Unit
from firstlume.services.git.polling import cache_of
from firstlume.services.git.pr_webhooks import parse_pull_request
from firstlume.services.git.proposed import Duplicate, handle_pull_request
from firstlume.services.git.pushes import Sighting, delivery_seen, follows, handle, prune_deliveries, view_of
from firstlume.services.git.webhooks import Hook, Push, identify, parse_push, verify
from firstlume.services.reads.catalog import ORG_COLUMNS, OrganizationRecord
from firstlume.services.reads.rows import column_rows

SECRET_BYTES = 32


def _secret_context(org_id: str) -> str:
    return f"git-webhook:{org_id}"


async def rotate_secret(unit: Unit, keyring: KeyRing, org: OrganizationRecord) -> str:
    """Creates or replaces the organization's webhook secret; the only time it is shown."""
    secret = secrets.token_urlsafe(SECRET_BYTES)
    sealed = keyring.encrypt_text(secret, _secret_context(org.id))
    row = await unit.session.get(GitWebhookSecret, org.id)
    if row is None:
        unit.session.add(GitWebhookSecret(org_id=org.id, secret_sealed=sealed, rotated_at=utcnow()))
    else:
        row.secret_sealed = sealed
        row.rotated_at = utcnow()
    await unit.session.flush()
    await audit.record(
        unit.session, org, AuditAction.WEBHOOK_SECRET_ROTATE, f"org:{org.slug}"
    )  # never the secret
    return secret


async def _org_and_secret(ctx: Context, slug: str) -> tuple[OrganizationRecord, str | None]:
    async with ctx.db.read() as session:
        rows = await column_rows(session, select(*ORG_COLUMNS).where(Organization.slug == slug))
        if not rows:
            raise NotFound(f"No organization '{slug}'.")
        org = OrganizationRecord(*rows[0])
        row = await session.get(GitWebhookSecret, org.id)
    secret = ctx.keyring.decrypt_text(row.secret_sealed, _secret_context(org.id)) if row else None
    return org, secret


async def _log(
    ctx: Context,
    org: OrganizationRecord,
    hook: Hook,
    http_status: int,
    result: dict[str, Any],
    push: Push | None = None,
) -> None:
    async with ctx.unit() as unit:
        unit.session.add(
            GitDelivery(
                org_id=org.id,
                source=hook.source,
                delivery=hook.delivery,
                event=hook.event[:100],
                repository=push.repository if push else None,
                ref=push.ref if push else None,
                head=push.after if push else None,
                http_status=http_status,
                result=result,
            )
        )
        await unit.session.flush()
        await prune_deliveries(unit.session, org.id)
        unit.publish_after_commit(org_git_channel(org.id), GitDeliveryLogged(org_id=org.id))


async def receive(ctx: Context, org_slug: str, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """Answers one webhook delivery (the response body); raises the refusals."""
    org, secret = await _org_and_secret(ctx, org_slug)
    hook = identify(headers)
    try:
        verify(hook, body, secret)
    except FirstlumeError as refusal:
        await _log(ctx, org, hook, refusal.http_status, {"refused": refusal.code, "message": refusal.message})
        raise
    if not hook.is_push and not hook.is_pull_request:
        await _log(ctx, org, hook, 200, {"ignored": "event"})
        return {"ignored": "event"}
    if hook.delivery is not None and await delivery_seen(ctx, org.id, hook.delivery):
        return {"duplicate": True, "runs": []}
    if hook.is_pull_request:
        return await _receive_pull_request(ctx, org, hook, body)
    try:
        push = parse_push(hook, body)
    except FirstlumeError as refusal:
        await _log(ctx, org, hook, refusal.http_status, {"refused": refusal.code, "message": refusal.message})
        raise
    branch = push.branch
    if branch is None or push.deletes_branch:
        reason = "not a branch" if branch is None else "the branch was deleted"
        answer: dict[str, Any] = {"runs": [], "ignored": [], "reason": reason}
        await _log(ctx, org, hook, 200, answer, push)
        return answer
    async with ctx.db.read() as session:
        stacks = [
            view_of(ctx, stack)
            for stack in await session.scalars(
                select(Stack).where(Stack.org_id == org.id, Stack.deleted_at.is_(None)).order_by(Stack.slug)
            )
            if follows(stack, push.repository_urls, branch)
        ]
    sighting = Sighting(
        org_id=org.id,
        repository=push.repository,
        branch=branch,
        head=push.after,
        source=hook.source,
        delivery=hook.delivery,
        event=hook.event[:100],
        before=push.before,
    )
    outcome = await handle(ctx, cache_of(ctx), sighting, stacks)
    if outcome.duplicate:
        return {"duplicate": True, "runs": []}
    answer = outcome.result()
    if not stacks:
        answer["reason"] = f"no stack follows branch '{branch}' of this repository"
    return answer


async def uses_repository(ctx: Context, org_id: str, repository_urls: list[str]) -> bool:
    """Whether a live stack of the organization uses the repository (any branch)."""
    wanted = {normalize_repository(url) for url in repository_urls if url}
    async with ctx.db.read() as session:
        repositories = await session.scalars(
            select(Stack.repository).where(Stack.org_id == org_id, Stack.deleted_at.is_(None)).distinct()
        )
        return any(normalize_repository(repository) in wanted for repository in repositories)


async def _receive_pull_request(
    ctx: Context, org: OrganizationRecord, hook: Hook, body: bytes
) -> dict[str, Any]:
    try:
        event = parse_pull_request(hook, body)
    except FirstlumeError as refusal:
        await _log(ctx, org, hook, refusal.http_status, {"refused": refusal.code, "message": refusal.message})
        raise
    if not await uses_repository(ctx, org.id, event.repository_urls):
        # A pull request is planned only by stacks of its base repository: one that no stack uses
        # is a webhook pointed at the wrong organization (or a stack that was never created),
        # which the host's delivery log should show as refused. Nothing but the delivery is kept.
        unknown = UnknownRepository(
            f"No stack of this organization uses repository '{event.repository}': create a stack "
            "for it (with pull_requests: plan), or point this webhook at the organization that has one."
        )
        await _log(ctx, org, hook, unknown.http_status, {"refused": unknown.code, "message": unknown.message})
        raise unknown
    try:
        return await handle_pull_request(ctx, org, hook, event)
    except Duplicate:
        return {"duplicate": True, "runs": []}
