"""The schema's enums. The domain's run types and statuses are exposed as they are; decorating
them here, before any type refers to them, gives them one definition."""

from __future__ import annotations

from enum import Enum

import strawberry

from firstlume.domain.runs import RunStatus, RunType

strawberry.enum(RunType, description="What a run does: plan, apply, destroy or drift.")
strawberry.enum(RunStatus, description="Where a run is in its lifecycle (see the documentation's diagram).")


@strawberry.enum(description="A step's status.")
class StepStatus(Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


@strawberry.enum(description="A planned change's state during and after the apply.")
class ResourceState(Enum):
    PENDING = "pending"
    APPLYING = "applying"
    DONE = "done"
    FAILED = "failed"
    NOT_APPLIED = "not_applied"


@strawberry.enum(
    description="What a change does to a resource; a replacement's stages are delete and create."
)
class ChangeAction(Enum):
    DELETE = "delete"
    REPLACE = "replace"
    UPDATE = "update"
    CREATE = "create"


@strawberry.enum
class VariableKind(Enum):
    TERRAFORM = "terraform"
    ENV = "env"


@strawberry.enum(description="Which Git credential a stack has; the credential itself is write-only.")
class GitAuth(Enum):
    HTTPS_TOKEN = "https_token"
    SSH_KEY = "ssh_key"


__all__ = ["RunStatus", "RunType"]
