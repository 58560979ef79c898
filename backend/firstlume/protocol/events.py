"""The pub/sub events, defined once for the code that publishes them and the code that listens.

They are signals, not data: ids, statuses and offsets, so that a listener knows what to read
again from the database (the source of truth). Every message stays well under PostgreSQL
NOTIFY's 8000-byte limit. Pydantic, like the commands and settings: one way to declare and
validate a shape in the whole code base, with errors that name the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from firstlume.domain.claims import Claim, claims_after
from firstlume.domain.runs import RunStatus, StepStatus

# NOTIFY refuses a payload of 8000 bytes or more; this leaves room for the envelope.
MAX_PAYLOAD_BYTES = 7900
# A resources event names the changed addresses only while they fit comfortably.
MAX_ADDRESS_BYTES = 6000


class _Event(BaseModel):
    # A newer process may add fields; an older listener ignores them.
    model_config = ConfigDict(frozen=True, extra="ignore")


class RunStatusChanged(_Event):
    """A run entered a status; `from_status` None means it was just created. Published through
    the outbox: never lost."""

    type: Literal["status"] = "status"
    run_id: str
    org_id: str
    status: RunStatus
    from_status: RunStatus | None = None


class StepChanged(_Event):
    type: Literal["step"] = "step"
    run_id: str
    step: str
    status: StepStatus


class LogAppended(_Event):
    """Text was stored at [offset, end) of the run's log, for `step`."""

    type: Literal["log"] = "log"
    run_id: str
    step: str
    offset: int
    end: int


class RunUpdated(_Event):
    """Something shown on the run changed (its commit, configuration, state backends)."""

    type: Literal["run"] = "run"
    run_id: str


class ChangesStored(_Event):
    """The plan's changes were stored."""

    type: Literal["changes"] = "changes"
    run_id: str


class ResourcesChanged(_Event):
    """Resource states changed: those at `addresses`, or any of the run's when None."""

    type: Literal["resources"] = "resources"
    run_id: str
    addresses: tuple[str, ...] | None = None

    @model_validator(mode="before")
    @classmethod
    def _name_few(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("addresses") is not None:
            if sum(len(str(a).encode()) + 3 for a in data["addresses"]) > MAX_ADDRESS_BYTES:
                return {**data, "addresses": None}
        return data


class GitDeliveryLogged(_Event):
    """The organization's Git delivery log has a new or completed entry."""

    type: Literal["git_delivery"] = "git_delivery"
    org_id: str


class Resync(_Event):
    """Delivered by this process to every subscriber after its pub/sub connection came back:
    events may have been missed meanwhile, so read everything again."""

    type: Literal["resync"] = "resync"


class Closed(_Event):
    """Delivered by this process when a subscription ends (at shutdown)."""

    type: Literal["closed"] = "closed"


Event = Annotated[
    RunStatusChanged
    | StepChanged
    | LogAppended
    | RunUpdated
    | ChangesStored
    | ResourcesChanged
    | GitDeliveryLogged
    | Resync
    | Closed,
    Field(discriminator="type"),
]
_EVENTS: TypeAdapter[Event] = TypeAdapter(Event)


def event_from(value: dict[str, Any]) -> Event:
    """The event model of a stored payload (validated)."""
    return _EVENTS.validate_python(value)


def encode(event: Event) -> str:
    text = event.model_dump_json(exclude_none=True)
    if len(text.encode()) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"a {event.type} event of {len(text.encode())} bytes is over NOTIFY's limit")
    return text


def decode(text: str) -> Event:
    return _EVENTS.validate_json(text)


def scheduler_claims(event: Event) -> frozenset[Claim]:
    """The claims a scheduler pass makes for `event` (domain/claims.py): a run's change names the
    status it changed to; any other event says nothing of it, so both."""
    return claims_after(event.status if isinstance(event, RunStatusChanged) else None)
