"""Every arrow of the lifecycle does exactly what domain/effects.py declares, on a real database:
steps, change states, phase tokens, the history, the outbox and the events that reach listeners.

The expectations are derived from the one table, but checked against the rows afterwards, and
the fixture gives every effect something to act on (and something it must leave alone)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import pytest
from sqlalchemy import select

from conftest import Tenant, make_stack
from firstlume.db.models import OutboxEvent, PhaseToken, ResourceChange, Run, RunStatusChange, RunStep
from firstlume.domain.effects import ALL_PENDING, EFFECTS, UNSTARTED_NOT_APPLIED, Effects
from firstlume.domain.runs import ARROWS, FINISHED, TRANSITIONS, ResourceState, RunStatus, RunType, StepStatus
from firstlume.protocol.events import Event, RunStatusChanged, RunUpdated
from firstlume.pubsub import SCHEDULER_CHANNEL, Subscription, org_runs_channel, run_channel
from firstlume.services import accounts, catalog
from firstlume.services.context import Context
from firstlume.services.outbox import OutboxRelay
from firstlume.services.transitions import change_status
from support.runs import start

S = RunStatus
R = ResourceState
NONE: list[dict[str, Any]] = []

# (address, state, stages): every kind of change an arrow may meet.
CHANGES: list[tuple[str, ResourceState | None, list[dict[str, Any]]]] = [
    ("terraform_data.planned", None, NONE),
    ("terraform_data.replace_waits", R.PENDING, [{"action": "delete", "state": "pending"}, {"action": "create", "state": "pending"}]),
    ("terraform_data.done", R.DONE, NONE),
    ("terraform_data.replace_half", R.APPLYING, [{"action": "create", "state": "done"}, {"action": "delete", "state": "pending"}]),
    ("terraform_data.waits", R.PENDING, NONE),
    ("terraform_data.broken", R.FAILED, NONE),
]  # fmt: skip
STEPS = {"checkout": StepStatus.DONE, "work": StepStatus.RUNNING}


def test_every_arrow_declares_its_effects_and_only_the_arrows_do() -> None:
    assert set(EFFECTS) == ARROWS
    assert ARROWS == {(None, S.QUEUED)} | {(a, b) for a, exits in TRANSITIONS.items() for b in exits}


def expected_changes(effects: Effects) -> list[tuple[str, ResourceState | None, list[dict[str, Any]]]]:
    changes = CHANGES
    # Resources caught mid-change move first, then the rest as `changes` says.
    for rule in (effects.interrupted_changes, effects.changes):
        if rule is None:
            continue
        if rule.only_once_started and all(state in (None, rule.only_from) for _, state, _ in changes):
            continue
        moved = []
        for address, state, stages in changes:
            # A change moves, and with it those of its stages in the same state, or it stays whole.
            if rule.only_from is None or state == rule.only_from:
                state = rule.to
                stages = [
                    {**s, "state": rule.to.value}
                    if rule.only_from is None or s["state"] == rule.only_from
                    else s
                    for s in stages
                ]
            moved.append((address, state, stages))
        changes = moved
    return changes


async def run_in(ctx: Context, tenant: Tenant, status: RunStatus) -> str:
    """A run put straight into `status`, with planned changes, steps and a live phase token."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        stack = await catalog.stack_by_slug(unit.session, org, "net")
        run = Run(
            org_id=org.id, stack_id=stack.id, number=1, type=RunType.APPLY, status=status,
            acknowledged=[], variables_used=[], state_backends=[], has_plan=True,
        )  # fmt: skip
        unit.session.add(run)
        await unit.session.flush()
        for position, (address, state, stages) in enumerate(CHANGES):
            unit.session.add(
                ResourceChange(
                    run_id=run.id,
                    position=position,
                    address=address,
                    type="terraform_data",
                    unit=".",
                    action="replace" if stages else "create",
                    attributes=[],
                    replaced_because=[],
                    state=state,
                    stages=stages,
                )
            )
        steps = dict(STEPS)
        if status is S.AWAITING_APPROVAL:
            steps["approval"] = StepStatus.RUNNING
        for position, (name, step_status) in enumerate(steps.items()):
            unit.session.add(RunStep(run_id=run.id, name=name, position=position, status=step_status))
        unit.session.add(PhaseToken(run_id=run.id, phase="plan", attempt=1, token_hash="h" * 64))
        return run.id


class Listener:
    """Every event of the run's, the organization's and the scheduler's channels, in order."""

    def __init__(self, ctx: Context, run_id: str, org_id: str) -> None:
        self.ctx = ctx
        self.channels = {
            "run": run_channel(run_id),
            "org": org_runs_channel(org_id),
            "scheduler": SCHEDULER_CHANNEL,
        }
        self.subscriptions: dict[str, Subscription] = {}

    async def __aenter__(self) -> Listener:
        self._stack = AsyncExitStack()
        for name, channel in self.channels.items():
            self.subscriptions[name] = await self._stack.enter_async_context(
                self.ctx.pubsub.subscribe(channel)
            )
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self._stack.aclose()

    async def heard(self) -> dict[str, list[Event]]:
        """What each channel carried so far: a marker sent after it all tells where that ends."""
        marker = RunUpdated(run_id="end-of-test")
        for channel in self.channels.values():
            await self.ctx.pubsub.publish(channel, marker)
        heard: dict[str, list[Event]] = {}
        for name, subscription in self.subscriptions.items():
            events: list[Event] = []
            while (event := await subscription.next(seconds=10)) != marker:
                assert event is not None, f"no end marker on {name}"
                events.append(event)
            heard[name] = events
        return heard


@pytest.fixture
async def org_id(ctx: Context, tenant: Tenant) -> str:
    async with ctx.db.transaction() as session:
        actor = await accounts.authenticate(session, tenant.token)
        return (await accounts.org_for(session, actor, tenant.org)).id


@pytest.mark.parametrize(("current", "target"), sorted(a for a in ARROWS if a[0] is not None))
async def test_each_transition_carries_out_exactly_its_declared_effects(
    ctx: Context, tenant: Tenant, org_id: str, current: RunStatus, target: RunStatus
) -> None:
    effects = EFFECTS[(current, target)]
    run_id = await run_in(ctx, tenant, current)
    async with Listener(ctx, run_id, org_id) as listener:
        async with ctx.unit() as unit:
            run = await unit.session.get(Run, run_id)
            assert run is not None
            await change_status(unit, run, target, actor="test")
        await OutboxRelay(ctx.db, ctx.pubsub).publish_pending()
        heard = await listener.heard()

    async with ctx.db.transaction() as session:
        run = await session.get(Run, run_id)
        assert run is not None and run.status is target
        assert (run.finished_at is not None) == (target in FINISHED)
        history = [(h.from_status, h.to_status) for h in await session.scalars(select(RunStatusChange))]
        assert history == [(current, target)]

        steps = {
            s.name: s.status for s in await session.scalars(select(RunStep).where(RunStep.run_id == run_id))
        }
        expected_steps = dict(STEPS)
        if current is S.AWAITING_APPROVAL:
            expected_steps["approval"] = StepStatus.RUNNING
        if effects.fail_running_steps:
            expected_steps = {
                n: StepStatus.FAILED if s is StepStatus.RUNNING else s for n, s in expected_steps.items()
            }
        expected_steps.update(effects.steps)
        assert steps == expected_steps

        changes = [
            (c.address, c.state, c.stages)
            for c in await session.scalars(select(ResourceChange).order_by(ResourceChange.position))
        ]
        assert changes == expected_changes(effects)

        failed = [address for address, state, _ in expected_changes(effects) if state is R.FAILED]
        if effects.record_failed_resources:
            assert (run.failed_resource_count, run.failed_resource_addresses) == (len(failed), failed)
        else:
            assert (run.failed_resource_count, run.failed_resource_addresses) == (0, [])

        [token] = await session.scalars(select(PhaseToken))
        assert (token.revoked_at is not None) == effects.revoke_phase_tokens

        [outbox] = await session.scalars(select(OutboxEvent))
        assert outbox.published_at is not None
        assert outbox.notification == effects.notification

    status_event = RunStatusChanged(run_id=run_id, org_id=org_id, status=target, from_status=current)
    assert heard["org"] == [status_event]
    assert heard["scheduler"] == ([status_event] if effects.wakes_scheduler else [])
    assert status_event in heard["run"]
    assert {event.type for event in heard["run"]} == set(effects.events)
    step_events = [(e.step, e.status) for e in heard["run"] if e.type == "step"]
    assert step_events == [
        *(
            (n, StepStatus.FAILED)
            for n, s in STEPS.items()
            if effects.fail_running_steps and s is StepStatus.RUNNING
        ),
        *effects.steps,
    ]


async def test_a_new_run_enters_queued_through_the_same_table(
    ctx: Context, tenant: Tenant, org_id: str
) -> None:
    effects = EFFECTS[(None, S.QUEUED)]
    assert (effects.steps, effects.changes, effects.revoke_phase_tokens) == ((), None, False)
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    async with Listener(ctx, "not-yet", org_id) as listener:
        run_id = await start(ctx, tenant.token, tenant.org, "net", "plan")
        await OutboxRelay(ctx.db, ctx.pubsub).publish_pending()
        heard = await listener.heard()
    created = RunStatusChanged(run_id=run_id, org_id=org_id, status=S.QUEUED, from_status=None)
    assert heard["org"] == [created]
    assert heard["scheduler"] == ([created] if effects.wakes_scheduler else [])
    async with ctx.db.transaction() as session:
        history = [(h.from_status, h.to_status) for h in await session.scalars(select(RunStatusChange))]
        assert history == [(None, S.QUEUED)]
        [outbox] = await session.scalars(select(OutboxEvent))
        assert (outbox.kind, outbox.notification, outbox.published_at is not None) == ("status", None, True)
        assert list(await session.scalars(select(RunStep))) == []
        assert list(await session.scalars(select(PhaseToken))) == []


def test_approval_rules_are_the_documented_ones() -> None:
    # The documentation's resource states: approved, hasn't started → pending; the apply ended
    # before it started → not_applied.
    assert (ALL_PENDING.to, ALL_PENDING.only_from) == (R.PENDING, None)
    assert (UNSTARTED_NOT_APPLIED.to, UNSTARTED_NOT_APPLIED.only_from) == (R.NOT_APPLIED, R.PENDING)
    # An apply that never began (no resource left pending) leaves every resource pending.
    assert UNSTARTED_NOT_APPLIED.only_once_started
