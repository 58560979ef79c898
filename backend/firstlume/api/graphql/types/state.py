"""Managed state of a stack: each unit's current serial, its lock and who holds it, its versions
(never their contents) and its outputs, with sensitive values hidden."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry import Private
from strawberry.scalars import JSON

from firstlume.api.graphql.loaders import Loaders
from firstlume.api.graphql.types.pagination import check_first
from firstlume.domain.errors import InvalidRequest
from firstlume.domain.state import ROOT_UNIT
from firstlume.domain.state_resources import StateResource as StateResourceRecord
from firstlume.domain.state_resources import matching
from firstlume.services.reads import state as state_reads
from firstlume.services.reads import state_contents
from firstlume.services.reads.catalog import StackRecord
from firstlume.services.reads.state import StateHeadRecord, VersionRecord
from firstlume.services.state.outputs import current_outputs

MAX_VERSIONS_PAGE = 100
MAX_RESOURCES_PAGE = 500
# The addresses a diff names in each list at most (its counts say how many there are in all).
MAX_DIFF_LIST = 1000


@strawberry.type(description="Terraform's state lock, and who holds it.")
class StateLock:
    id: str
    holder: str = strawberry.field(description='A person\'s email, or "run #3 (apply phase)".')
    run_id: strawberry.ID | None = strawberry.field(
        description="The run whose phase holds it, if a run does."
    )
    phase: str | None
    operation: str | None = strawberry.field(description="Terraform's operation, such as OperationTypeApply.")
    who: str | None = strawberry.field(description="Terraform's user@host of the holder.")
    created: str | None = strawberry.field(description="When Terraform took it, as Terraform wrote it.")
    locked_at: datetime | None

    @classmethod
    def of(cls, head: StateHeadRecord) -> StateLock | None:
        if head.lock_id is None:
            return None
        info = head.lock_info or {}
        return cls(
            id=head.lock_id,
            holder=head.lock_holder or "unknown",
            run_id=strawberry.ID(head.lock_run_id) if head.lock_run_id else None,
            phase=head.lock_phase.value if head.lock_phase else None,
            operation=info.get("Operation"),
            who=info.get("Who"),
            created=info.get("Created"),
            locked_at=head.locked_at,
        )


@strawberry.type(description="One stored state. Its contents are downloaded from the REST route.")
class StateVersion:
    serial: int
    lineage: str
    sha256: str
    resources: int = strawberry.field(description="Managed resource instances in it.")
    created_at: datetime
    created_by: str = strawberry.field(description='A person\'s email, or "run #3 (apply phase)".')
    run_id: strawberry.ID | None
    run_number: int | None
    phase: str | None

    @classmethod
    def of(cls, record: VersionRecord) -> StateVersion:
        return cls(
            serial=record.serial,
            lineage=record.lineage,
            sha256=record.sha256,
            resources=record.resources,
            created_at=record.created_at,
            created_by=record.writer,
            run_id=strawberry.ID(record.run_id) if record.run_id else None,
            run_number=record.run_number,
            phase=record.run_phase,
        )


@strawberry.type
class StateOutput:
    name: str
    type: JSON | None = strawberry.field(description="Terraform's type of the value, as in the state.")
    value: JSON | None = strawberry.field(description='The value; "(sensitive)" for a sensitive one.')
    sensitive: bool


@strawberry.type(description="A managed resource instance of a state, by name (never its attributes).")
class StateResource:
    address: str
    type: str
    provider: str = strawberry.field(description='Such as "hashicorp/aws" (the default registry left out).')


def _named(found: list[StateResourceRecord]) -> list[StateResource]:
    return [StateResource(address=r.address, type=r.type, provider=r.provider) for r in found]


@strawberry.type(description="A page of a state version's resources, by address.")
class StateResourcePage:
    serial: int | None
    total_count: int = strawberry.field(description="How many match the search, in all.")
    offset: int
    nodes: list[StateResource]


@strawberry.type(description="What one state version added, removed and changed against another, by address.")
class StateDiff:
    from_serial: int
    to_serial: int
    added_count: int
    removed_count: int
    changed_count: int
    added: list[StateResource] = strawberry.field(description=f"The first {MAX_DIFF_LIST}.")
    removed: list[StateResource] = strawberry.field(description=f"The first {MAX_DIFF_LIST}.")
    changed: list[StateResource] = strawberry.field(
        description=f"Whose attributes differ (the first {MAX_DIFF_LIST}); never the values."
    )


def _check_serial(name: str, value: int) -> None:
    if value < 0:
        raise InvalidRequest(f"'{name}' must be a serial of this state, 0 or more; got {value}.", field=name)


@strawberry.type(
    description='The managed state of one unit: "." for the root module, or a Terragrunt unit\'s path.'
)
class StackState:
    stack: Private[StackRecord]
    head: Private[StateHeadRecord | None]
    loaders: Private[Loaders]
    unit: str

    @strawberry.field(description="The current serial; null when there is no state.")
    def serial(self) -> int | None:
        return self.head.serial if self.head else None

    @strawberry.field
    def lineage(self) -> str | None:
        return self.head.lineage if self.head else None

    @strawberry.field
    def lock(self) -> StateLock | None:
        return StateLock.of(self.head) if self.head else None

    @strawberry.field(description=f"Newest first; `first` is at most {MAX_VERSIONS_PAGE}; `before` a serial.")
    async def versions(self, first: int = 20, before: int | None = None) -> list[StateVersion]:
        check_first(first, MAX_VERSIONS_PAGE)
        if self.head is None:
            return []
        async with self.loaders.reads.session() as session:
            records = await state_reads.versions(session, self.head.id, limit=first, before=before)
        return [StateVersion.of(r) for r in records]

    @strawberry.field(
        description="The resource instances of the current version (or of `serial`), by address: "
        f"`first` (at most {MAX_RESOURCES_PAGE}) from `offset`, those whose address, type or provider "
        "contains `search`. Names only, never attribute values."
    )
    async def resources(
        self, first: int = 100, offset: int = 0, search: str | None = None, serial: int | None = None
    ) -> StateResourcePage:
        check_first(first, MAX_RESOURCES_PAGE)
        if offset < 0:
            raise InvalidRequest(f"'offset' must be 0 or more; got {offset}.", field="offset")
        wanted = serial if serial is not None else (self.head.serial if self.head else None)
        if wanted is None:
            return StateResourcePage(serial=None, total_count=0, offset=offset, nodes=[])
        _check_serial("serial", wanted)
        async with self.loaders.reads.session() as session:
            found = await state_contents.version_resources(
                session, self.loaders.ctx.keyring, self.stack, self.unit, wanted
            )
        kept = matching(found, search.strip() if search else None)
        return StateResourcePage(
            serial=wanted, total_count=len(kept), offset=offset, nodes=_named(kept[offset : offset + first])
        )

    @strawberry.field(
        description="What version `toSerial` added, removed and changed against version `fromSerial`."
    )
    async def diff(self, from_serial: int, to_serial: int) -> StateDiff:
        _check_serial("fromSerial", from_serial)
        _check_serial("toSerial", to_serial)
        async with self.loaders.reads.session() as session:
            found = await state_contents.version_diff(
                session, self.loaders.ctx.keyring, self.stack, self.unit, from_serial, to_serial
            )
        return StateDiff(
            from_serial=from_serial,
            to_serial=to_serial,
            added_count=len(found.added),
            removed_count=len(found.removed),
            changed_count=len(found.changed),
            added=_named(found.added[:MAX_DIFF_LIST]),
            removed=_named(found.removed[:MAX_DIFF_LIST]),
            changed=_named(found.changed[:MAX_DIFF_LIST]),
        )

    # Nullable on purpose: a reader may not read outputs (the permission table says operator), and
    # the refusal must null this field alone (with its error), not the whole stack above it.
    @strawberry.field(
        description='The current state\'s outputs; sensitive values are "(sensitive)". Null, with a '
        "forbidden error at this path, for a role that may not read them (readers)."
    )
    async def outputs(self) -> list[StateOutput] | None:
        if self.head is None or self.head.serial is None:
            return []
        async with self.loaders.reads.session() as session:
            outputs = await current_outputs(session, self.loaders.ctx.keyring, self.stack, self.unit)
        return [StateOutput(name=o.name, type=o.type, value=o.value, sensitive=o.sensitive) for o in outputs]


async def states_of(loaders: Loaders, stack: StackRecord) -> list[StackState]:
    heads = await loaders.state_heads.load(stack.id)
    return [StackState(stack=stack, head=h, loaders=loaders, unit=h.unit) for h in heads]


async def state_of(loaders: Loaders, stack: StackRecord, unit: str = ROOT_UNIT) -> StackState:
    heads = await loaders.state_heads.load(stack.id)
    head = next((h for h in heads if h.unit == unit), None)
    return StackState(stack=stack, head=head, loaders=loaders, unit=unit)
