"""Writing the audit trail: one row per change, in the change's own transaction.

Who made the change is bound to the session where the caller's organization is resolved
(accounts.authenticate_in_org, accounts.org_for), so the services that make changes need no
actor argument to record them. Which API it came through and the request's id come from the
request (`entered_via`, set by the REST endpoint wrapper, the GraphQL endpoint and the CLI).
How to add an audited action: see domain/audit.py.
"""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.append import append_rows
from firstlume.db.models import Stack
from firstlume.db.models_audit import AuditEntry
from firstlume.db.types import utcnow
from firstlume.domain.audit import SYSTEM_ACTOR, AuditAction, AuditVia, secret_keys_in
from firstlume.logs import REQUEST_ID as served_request_id
from firstlume.services.context import Actor
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord

ACTOR_KEY = "firstlume.audit.actor"
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_AUDIT_ENTRIES = cast(Table, AuditEntry.__table__)


@dataclass(frozen=True)
class Origin:
    via: AuditVia
    request_id: str | None = None


SYSTEM_ORIGIN = Origin(AuditVia.SYSTEM)
_origin: ContextVar[Origin | None] = ContextVar("firstlume_audit_origin", default=None)


def entered_via(via: AuditVia, request_id: str | None = None) -> str:
    """Marks the current request (task) as coming through `via`; returns its request id: the
    caller's own when it is a sensible one, else a new one. A served request already has one (the
    middleware's, in its logs and its response's X-Request-ID): that one, so all three agree."""
    served = served_request_id.get()
    if served:
        request_id = served
    elif request_id is None or not REQUEST_ID.match(request_id):
        request_id = uuid.uuid4().hex
    _origin.set(Origin(via, request_id))
    return request_id


def current_origin() -> Origin:
    return _origin.get() or SYSTEM_ORIGIN


def bind_actor(session: AsyncSession, actor: Actor) -> None:
    """The person on whose behalf this session's changes are made."""
    session.info[ACTOR_KEY] = actor


def bound_actor(session: AsyncSession) -> Actor | None:
    actor = session.info.get(ACTOR_KEY)
    return actor if isinstance(actor, Actor) else None


def without_credentials(url: str) -> str:
    """A URL without the user and password it may carry (https://user:token@host/...)."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    authority, slash, path = rest.partition("/")
    host = authority.rpartition("@")[2]
    return f"{scheme}://{host}{slash}{path}"


Where = OrganizationRecord | StackRecord | Stack | str


def org_id_of(where: Where) -> str:
    if isinstance(where, OrganizationRecord):
        return where.id
    if isinstance(where, StackRecord | Stack):
        return where.org_id
    return where


async def record(
    session: AsyncSession,
    org: Where,
    action: AuditAction,
    target: str,
    details: dict[str, Any] | None = None,
    *,
    stack: str | None = None,
    actor: Actor | None = None,
    by_system: bool = False,
) -> None:
    """Inserts the audit row of a change in the change's transaction: it commits with the change
    or not at all. `org` is the organization (or a stack of it, or its id); `stack` the slug of
    the stack concerned, if any (a Stack given as `org` counts). `actor` defaults to the session's bound
    actor, else "system"; `by_system` records "system" whoever is bound (a push, the schedule)."""
    details = dict(details or {})
    secrets = secret_keys_in(details)
    if secrets:
        # A programming error: the caller must record names, not values.
        raise ValueError(f"audit details must not hold secrets or values: {', '.join(secrets)}")
    who = None if by_system else actor or bound_actor(session)
    origin = current_origin()
    if stack is None and isinstance(org, StackRecord | Stack):
        stack = org.slug
    await append_rows(
        session,
        _AUDIT_ENTRIES,
        {
            "org_id": org_id_of(org),
            "created_at": utcnow(),
            "actor": who.email if who else SYSTEM_ACTOR,
            "actor_user_id": who.user_id if who else None,
            "actor_token_id": who.token_id if who else None,
            "action": AuditAction(action).value,
            "target": target,
            "stack": stack,
            "details": details,
            "via": origin.via.value,
            "request_id": origin.request_id,
        },
    )
