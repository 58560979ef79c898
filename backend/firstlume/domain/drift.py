"""What the drift overview and the delivery history call things (platform-api.md, sections 3, 4)."""

from __future__ import annotations

from enum import StrEnum

from firstlume.domain.runs import RunStatus


class DriftStatus(StrEnum):
    """A stack's drift, from the outcome of its latest finished drift run."""

    IN_SYNC = "in_sync"
    DRIFTED = "drifted"
    ERROR = "error"
    UNKNOWN = "unknown"


# The finished drift run's status → the stack's drift status.
DRIFT_OUTCOMES: dict[RunStatus, DriftStatus] = {
    RunStatus.NO_CHANGES: DriftStatus.IN_SYNC,
    RunStatus.DRIFTED: DriftStatus.DRIFTED,
    RunStatus.FAILED: DriftStatus.ERROR,
}

# The REST field that lists a stack's (or drift run's) drifted addresses.
DRIFTED_FIELD = "drifted"


class DeliveryStatus(StrEnum):
    """Where a notification delivery stands."""

    PENDING = "pending"
    RETRYING = "retrying"
    DELIVERED = "delivered"
    FAILED = "failed"


# What a drift run's planned action says happened outside Terraform: a drift plan plans the last
# applied commit, so the code did not change and the plan undoes what changed in the real world
# (Terraform's `resource_drift` tells the same from the other side: a changed object is an
# "update", a vanished one a "delete").
DRIFT_FINDINGS: dict[str, str] = {
    "create": "Deleted outside Terraform",
    "update": "Changed outside Terraform",
    "replace": "Changed outside Terraform (to be replaced)",
    "delete": "In the state, not in the code",
}


def drift_finding(action: str) -> str:
    """The words for a drifted resource, by what a plan would do to bring it back."""
    return DRIFT_FINDINGS.get(action, "Changed outside Terraform")
