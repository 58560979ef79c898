"""What each arrow of the lifecycle does besides moving the status, declared once.

`EFFECTS` is keyed by the same (from, to) pairs as `runs.TRANSITIONS` (`runs.ARROWS`: run
creation is the arrow from None). `services.transitions.change_status` is the only code that carries these out, in the
transaction of the status change itself, so no caller can forget one or do one twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from firstlume.domain.runs import ResourceState, RunStatus, StepStatus

# The step a person (or the approval rule) decides; the executor reports every other step.
APPROVAL_STEP = "approval"


class Notification(StrEnum):
    """What notifications name the events they send (platform-api.md, section 4)."""

    AWAITING_APPROVAL = "run.awaiting_approval"
    APPLIED = "run.applied"
    FAILED = "run.failed"
    DRIFTED = "run.drifted"
    DISCARDED = "run.discarded"
    CANCELED = "run.canceled"
    NO_CHANGES = "run.no_changes"
    PLANNED = "run.planned"


@dataclass(frozen=True)
class ChangeStates:
    """Planned changes move to `to`, and so does each stage of a replacement; when `only_from`
    is given, only the changes (and stages) in that state move."""

    to: ResourceState
    only_from: ResourceState | None = None
    # Only when some change has already left `only_from`: the apply had begun.
    only_once_started: bool = False


# Approved, not started: every listed resource, and each stage of a replacement, is pending.
ALL_PENDING = ChangeStates(ResourceState.PENDING)
# The apply ended: what never started once others had will not (the documentation's
# `not_applied`: "the apply ended before it started, which only happens when another resource
# failed"). When no resource started at all (Terraform refused a stale plan, the plan file failed
# its check), the apply never began: every resource stays `pending`, and the run's error says why.
UNSTARTED_NOT_APPLIED = ChangeStates(
    ResourceState.NOT_APPLIED, only_from=ResourceState.PENDING, only_once_started=True
)


# The apply ended while these were still applying: their executor is gone (killed, silent),
# so whatever they were doing did not finish as reported. They count among the failed.
INTERRUPTED_FAILED = ChangeStates(ResourceState.FAILED, only_from=ResourceState.APPLYING)


@dataclass(frozen=True)
class Effects:
    # Steps set to a status (created when missing), in this order.
    steps: tuple[tuple[str, StepStatus], ...] = ()
    # Steps still running fail with the run: their executor is gone.
    fail_running_steps: bool = False
    changes: ChangeStates | None = None
    # Applied before `changes`: resources caught mid-change.
    interrupted_changes: ChangeStates | None = None
    # The phase's executor token dies with its phase.
    revoke_phase_tokens: bool = False
    # The apply ended: the run counts its failed resources (failed_resources), apart from its error.
    record_failed_resources: bool = False
    # The scheduler has work at once: a new run, an approved apply, or a stack freed for the
    # next queued run. Otherwise it would find out at its next tick.
    wakes_scheduler: bool = False
    notification: Notification | None = None
    # The apply succeeded: the stacks that read this stack's outputs may have to run
    # (services/dependencies/outbox.py writes the trigger in the same transaction).
    triggers_dependents: bool = False

    @property
    def events(self) -> tuple[str, ...]:
        """The pub/sub event types the arrow emits. The status change itself always (through the
        outbox, never lost); a step or resource change as a best-effort wake-up of live views."""
        kinds = ["status"]
        if self.steps or self.fail_running_steps:
            kinds.append("step")
        if self.changes is not None or self.interrupted_changes is not None:
            kinds.append("resources")
        return tuple(kinds)


S = RunStatus
N = Notification

EFFECTS: dict[tuple[RunStatus | None, RunStatus], Effects] = {
    (None, S.QUEUED): Effects(wakes_scheduler=True),
    (S.QUEUED, S.PLANNING): Effects(),
    (S.QUEUED, S.CANCELED): Effects(wakes_scheduler=True, notification=N.CANCELED),
    (S.PLANNING, S.NO_CHANGES): Effects(
        revoke_phase_tokens=True, wakes_scheduler=True, notification=N.NO_CHANGES
    ),
    (S.PLANNING, S.PLANNED): Effects(revoke_phase_tokens=True, wakes_scheduler=True, notification=N.PLANNED),
    (S.PLANNING, S.DRIFTED): Effects(revoke_phase_tokens=True, wakes_scheduler=True, notification=N.DRIFTED),
    (S.PLANNING, S.AWAITING_APPROVAL): Effects(
        steps=((APPROVAL_STEP, StepStatus.RUNNING),),
        revoke_phase_tokens=True,
        notification=N.AWAITING_APPROVAL,
    ),
    # Approval not required: the rule decided, nobody has to.
    (S.PLANNING, S.APPLY_QUEUED): Effects(
        steps=((APPROVAL_STEP, StepStatus.SKIPPED),),
        changes=ALL_PENDING,
        revoke_phase_tokens=True,
        wakes_scheduler=True,
    ),
    (S.PLANNING, S.FAILED): Effects(
        revoke_phase_tokens=True, wakes_scheduler=True, fail_running_steps=True, notification=N.FAILED
    ),
    (S.AWAITING_APPROVAL, S.APPLY_QUEUED): Effects(
        steps=((APPROVAL_STEP, StepStatus.DONE),), changes=ALL_PENDING, wakes_scheduler=True
    ),
    (S.AWAITING_APPROVAL, S.DISCARDED): Effects(
        steps=((APPROVAL_STEP, StepStatus.SKIPPED),), wakes_scheduler=True, notification=N.DISCARDED
    ),
    (S.APPLY_QUEUED, S.APPLYING): Effects(),
    (S.APPLY_QUEUED, S.CANCELED): Effects(wakes_scheduler=True, notification=N.CANCELED),
    (S.APPLYING, S.APPLIED): Effects(
        revoke_phase_tokens=True,
        wakes_scheduler=True,
        changes=UNSTARTED_NOT_APPLIED,
        record_failed_resources=True,
        notification=N.APPLIED,
        triggers_dependents=True,
    ),
    (S.APPLYING, S.FAILED): Effects(
        revoke_phase_tokens=True,
        wakes_scheduler=True,
        fail_running_steps=True,
        interrupted_changes=INTERRUPTED_FAILED,
        changes=UNSTARTED_NOT_APPLIED,
        record_failed_resources=True,
        notification=N.FAILED,
    ),
}


def effects_of(current: RunStatus | None, target: RunStatus) -> Effects:
    return EFFECTS[(current, target)]
