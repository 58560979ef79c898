"""The schema's enums. The domain's run types and statuses are exposed as they are; decorating
them here, before any type refers to them, gives them one definition."""

from __future__ import annotations

from enum import Enum

import strawberry

from firstlume.domain.drift import DeliveryStatus, DriftStatus
from firstlume.domain.git import ForkPolicy, PullRequestMode, StackTrigger
from firstlume.domain.inheritance import VariableKind
from firstlume.domain.runs import ResourceState, RunStatus, RunType, StepStatus, TriggerKind

strawberry.enum(RunType, description="What a run does: plan, apply, destroy or drift.")
strawberry.enum(RunStatus, description="Where a run is in its lifecycle (see the documentation's diagram).")
strawberry.enum(StepStatus, description="A step's status.")
strawberry.enum(ResourceState, description="A planned change's state during and after the apply.")
strawberry.enum(VariableKind)
strawberry.enum(
    StackTrigger, description="What a new commit on a stack's branch that touches the stack starts."
)
strawberry.enum(
    PullRequestMode,
    description="What a pull request against a stack's branch that touches the stack starts: nothing "
    "(off) or a proposed plan (plan).",
)
strawberry.enum(
    ForkPolicy,
    description="What a pull request from a fork (untrusted code) may run: nothing, a plan without the "
    "sensitive variables, or a plan.",
)
strawberry.enum(
    DriftStatus,
    description="A stack's drift, from its latest finished drift run: no changes (in sync), drifted, "
    "failed (error), or no drift run yet (unknown).",
)
strawberry.enum(DeliveryStatus, description="Where a notification delivery stands.")
strawberry.enum(
    TriggerKind,
    description="What started a run: a person, a push to the branch, the drift schedule, or a pull "
    "request (a proposed run).",
)


@strawberry.enum(
    description="What a change does to a resource; a replacement's stages are delete and create."
)
class ChangeAction(Enum):
    DELETE = "delete"
    REPLACE = "replace"
    UPDATE = "update"
    CREATE = "create"


@strawberry.enum(description="Which Git credential a stack has; the credential itself is write-only.")
class GitAuth(Enum):
    HTTPS_TOKEN = "https_token"
    SSH_KEY = "ssh_key"


__all__ = [
    "DeliveryStatus",
    "DriftStatus",
    "ForkPolicy",
    "PullRequestMode",
    "ResourceState",
    "RunStatus",
    "RunType",
    "StackTrigger",
    "StepStatus",
    "TriggerKind",
    "VariableKind",
]
