"""Drift (the fleet view, a stack's drift history) and notifications (destinations, deliveries and
their attempts). Read through the read layer in the operation's read session."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import strawberry
from strawberry import Private

from firstlume.api.graphql.enums import DeliveryStatus, DriftStatus
from firstlume.api.graphql.loaders import Loaders
from firstlume.api.graphql.types.pagination import check_first
from firstlume.api.graphql.types.runs import Run
from firstlume.domain.drift import drift_finding
from firstlume.services.reads import drift as drift_reads
from firstlume.services.reads import notifications as notification_reads
from firstlume.services.reads.notifications import DeliveryRecord, DestinationRecord

if TYPE_CHECKING:
    from firstlume.api.graphql.types.catalog import Stack

MAX_DELIVERIES = 100


@strawberry.type(description="A resource a drift run found changed outside Firstlume.")
class DriftedResource:
    address: str
    action: str = strawberry.field(description="What a plan would do to bring it back: create, update, …")
    finding: str = strawberry.field(
        description='What drifted, in words: "Changed outside Terraform", "Deleted outside Terraform", …'
    )


def _resources(found: list[drift_reads.DriftedResource]) -> list[DriftedResource]:
    return [
        DriftedResource(address=r.address, action=r.action, finding=drift_finding(r.action)) for r in found
    ]


@strawberry.type(description="One stack's line of the drift overview.")
class StackDrift:
    stack_id: Private[str]
    loaders: Private[Loaders]
    stack_slug: str
    stack_name: str
    status: DriftStatus
    since: datetime | None = strawberry.field(description="When the stack entered this status.")
    last_run: Run | None
    drifted: list[DriftedResource]
    drifted_count: int = strawberry.field(
        description="How many resources drifted in all (`drifted` names the first 200)."
    )

    @strawberry.field(
        description="The stack: its effective drift schedule, the caller's role on it, …",
        graphql_type=Annotated["Stack", strawberry.lazy("firstlume.api.graphql.types.catalog")],
    )
    async def stack(self) -> Stack:
        from firstlume.api.graphql.types.catalog import Stack  # the catalog imports this module

        row = await self.loaders.stack.load(self.stack_id)
        assert row is not None  # the overview lists live stacks only
        return Stack(row=row, loaders=self.loaders)


@strawberry.type(description="A drift run of a stack and what it found.")
class DriftCheck:
    run: Run
    status: DriftStatus
    drifted: list[DriftedResource]


async def overview(loaders: Loaders, org_id: str) -> list[StackDrift]:
    async with loaders.reads.session() as session:
        lines = await drift_reads.overview(session, org_id)
    return [
        StackDrift(
            stack_id=line.stack_id,
            loaders=loaders,
            stack_slug=line.stack_slug,
            stack_name=line.stack_name,
            status=line.status,
            since=line.since,
            last_run=Run(row=line.last_run, loaders=loaders) if line.last_run else None,
            drifted=_resources(line.drifted),
            drifted_count=line.drifted_count,
        )
        for line in lines
    ]


async def history(loaders: Loaders, stack_id: str, first: int) -> list[DriftCheck]:
    async with loaders.reads.session() as session:
        found = await drift_reads.history(session, stack_id, limit=first)
    return [
        DriftCheck(
            run=Run(row=item.run, loaders=loaders), status=item.status, drifted=_resources(item.drifted)
        )
        for item in found
    ]


@strawberry.type
class NotificationAttempt:
    number: int
    at: datetime
    status_code: int | None
    duration_ms: int
    error: str | None


@strawberry.type(description="One event for one destination; its id is the X-Firstlume-Delivery header.")
class NotificationDelivery:
    id: strawberry.ID
    event: str
    run_id: strawberry.ID | None
    test: bool
    status: DeliveryStatus
    created_at: datetime
    delivered_at: datetime | None
    attempts: list[NotificationAttempt]


def delivery_of(d: DeliveryRecord) -> NotificationDelivery:
    return NotificationDelivery(
        id=strawberry.ID(d.id),
        event=d.event,
        run_id=strawberry.ID(d.run_id) if d.run_id else None,
        test=d.test,
        status=d.status,
        created_at=d.created_at,
        delivered_at=d.delivered_at,
        attempts=[
            NotificationAttempt(
                number=a.number, at=a.at, status_code=a.status_code, duration_ms=a.duration_ms, error=a.error
            )
            for a in d.attempts
        ],
    )


@strawberry.type(description="Where run events are sent. The signing secret is write-only.")
class NotificationDestination:
    view: Private[DestinationRecord]
    loaders: Private[Loaders]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(self.view.id)

    @strawberry.field
    def name(self) -> str:
        return self.view.name

    @strawberry.field
    def url(self) -> str:
        return self.view.url

    @strawberry.field
    def events(self) -> list[str]:
        return list(self.view.events)

    @strawberry.field(description="json or slack.")
    def format(self) -> str:
        return self.view.format

    @strawberry.field(description="The folder path of a folder's destination.")
    def folder(self) -> str | None:
        return self.view.folder

    @strawberry.field(description="The stack slug of a stack's destination.")
    def stack(self) -> str | None:
        return self.view.stack

    @strawberry.field
    def has_secret(self) -> bool:
        return self.view.has_secret

    @strawberry.field
    def created_at(self) -> datetime:
        return self.view.created_at

    @strawberry.field(
        description=f"Newest first, each with its attempts; `first` is at most {MAX_DELIVERIES}."
    )
    async def deliveries(self, first: int = 20) -> list[NotificationDelivery]:
        check_first(first, MAX_DELIVERIES)
        async with self.loaders.reads.session() as session:
            found = await notification_reads.deliveries(session, self.view.id, limit=first)
        return [delivery_of(d) for d in found]


async def destinations(loaders: Loaders, org_id: str) -> list[NotificationDestination]:
    async with loaders.reads.session() as session:
        views = await notification_reads.destinations(session, org_id)
    return [NotificationDestination(view=v, loaders=loaders) for v in views]


async def destination_of(loaders: Loaders, org_id: str, destination_id: str) -> NotificationDestination:
    async with loaders.reads.session() as session:
        [view] = await notification_reads.destinations(session, org_id, [destination_id])
    return NotificationDestination(view=view, loaders=loaders)
