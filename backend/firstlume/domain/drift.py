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
