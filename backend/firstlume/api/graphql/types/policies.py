"""Policies as code (adoption-api.md section 8): an organization's policies, and a run's checks."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry

from firstlume.services.policies.store import PolicyRecord


@strawberry.type(
    description="A Rego module evaluated at the end of each plan of the stacks whose `policies` name it."
)
class Policy:
    name: str
    kind: str = strawberry.field(
        description='"plan" (deny, warn) or "approval" (approvals_required, approvers).'
    )
    description: str
    rego: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, record: PolicyRecord) -> Policy:
        return cls(
            name=record.name,
            kind=record.kind.value,
            description=record.description,
            rego=record.rego,
            created_at=record.created_at,
            updated_at=record.updated_at,
        )


@strawberry.type(description="One policy's result on a run, or on a test input.")
class PolicyCheck:
    policy: str
    kind: str
    result: str = strawberry.field(description='"pass", "warn" or "deny" (an error or a timeout denies).')
    messages: list[str]
    took_ms: int
    approvals_required: int | None = strawberry.field(
        default=None, description="What an approval policy asks for: this many approvals."
    )
    approvers: list[str] | None = strawberry.field(
        default=None, description="What an approval policy asks for: approvals from these."
    )

    @classmethod
    def of(cls, check: dict[str, Any]) -> PolicyCheck:
        return cls(
            policy=check["policy"],
            kind=check["kind"],
            result=check["result"],
            messages=list(check["messages"]),
            took_ms=int(check["took_ms"]),
            approvals_required=check.get("approvals_required"),
            approvers=check.get("approvers"),
        )


@strawberry.type(
    description="One of the approvals a run needs (its approval policies asked for more than one): who, and when."
)
class GivenApproval:
    by: str
    at: str
    comment: str | None = strawberry.field(default=None, description="The approver's comment, if any.")
