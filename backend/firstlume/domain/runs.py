"""Run types, statuses and the lifecycle diagram of the user documentation, as one table.

queued ─▶ planning ─┬─▶ no_changes                       (no changes)
                    ├─▶ planned                          (type=plan)
                    ├─▶ awaiting_approval ─┬─▶ apply_queued ─▶ applying ─▶ applied
                    │                      └─▶ discarded
                    ├─▶ apply_queued                     (approval not required)
                    └─▶ drifted                          (type=drift)
any running phase ─▶ failed  |  queued/apply_queued ─▶ canceled
"""

from __future__ import annotations

from enum import StrEnum

from firstlume.domain.errors import InvalidTransition


class RunType(StrEnum):
    PLAN = "plan"
    APPLY = "apply"
    DESTROY = "destroy"
    DRIFT = "drift"

    @property
    def intends_to_apply(self) -> bool:
        return self in (RunType.APPLY, RunType.DESTROY)


class RunStatus(StrEnum):
    QUEUED = "queued"
    PLANNING = "planning"
    NO_CHANGES = "no_changes"
    PLANNED = "planned"
    AWAITING_APPROVAL = "awaiting_approval"
    APPLY_QUEUED = "apply_queued"
    APPLYING = "applying"
    APPLIED = "applied"
    DISCARDED = "discarded"
    DRIFTED = "drifted"
    FAILED = "failed"
    CANCELED = "canceled"


# The apply phase's one step (its checkout, init and apply are parts of it).
APPLY_STEP = "apply"


class StepStatus(StrEnum):
    """A step of a run: checkout, init, plan, approval, apply, …"""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


class ResourceState(StrEnum):
    """A planned change's state during the apply (the documentation's table)."""

    PENDING = "pending"
    APPLYING = "applying"
    DONE = "done"
    FAILED = "failed"
    NOT_APPLIED = "not_applied"


class PhaseResult(StrEnum):
    """What an executor reports of its phase (not a run status: the control plane decides that)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"


class TriggerKind(StrEnum):
    """What started a run."""

    MANUAL = "manual"
    PUSH = "push"
    SCHEDULE = "schedule"
    DEPENDENCY = "dependency"
    # A pull request's head: a proposed run (a plan that never applies).
    PULL_REQUEST = "pull_request"
    # The Terraform CLI (a `cloud` block): the run plans an uploaded configuration version.
    CLI = "cli"


class Phase(StrEnum):
    """What an executor does: the plan phase or the apply phase of a run."""

    PLAN = "plan"
    APPLY = "apply"


S = RunStatus

# Every run is created in this status; the lifecycle's one arrow that starts from nothing.
INITIAL: RunStatus = S.QUEUED

TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    S.QUEUED: frozenset({S.PLANNING, S.CANCELED}),
    S.PLANNING: frozenset(
        {S.NO_CHANGES, S.PLANNED, S.AWAITING_APPROVAL, S.APPLY_QUEUED, S.DRIFTED, S.FAILED}
    ),
    S.AWAITING_APPROVAL: frozenset({S.APPLY_QUEUED, S.DISCARDED}),
    S.APPLY_QUEUED: frozenset({S.APPLYING, S.CANCELED}),
    S.APPLYING: frozenset({S.APPLIED, S.FAILED}),
    S.NO_CHANGES: frozenset(),
    S.PLANNED: frozenset(),
    S.APPLIED: frozenset(),
    S.DISCARDED: frozenset(),
    S.DRIFTED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELED: frozenset(),
}

# Every arrow of the diagram, run creation included, as (from, to) pairs.
ARROWS: frozenset[tuple[RunStatus | None, RunStatus]] = frozenset(
    {(None, INITIAL)} | {(current, target) for current, exits in TRANSITIONS.items() for target in exits}
)

# Named groups. A run holds its stack's lock from the moment it starts planning until it
# finishes; queued runs wait in arrival order behind it.
WAITING: frozenset[RunStatus] = frozenset({S.QUEUED})
HOLDS_LOCK: frozenset[RunStatus] = frozenset({S.PLANNING, S.AWAITING_APPROVAL, S.APPLY_QUEUED, S.APPLYING})
RUNNING: frozenset[RunStatus] = frozenset({S.PLANNING, S.APPLYING})
CANCELABLE: frozenset[RunStatus] = frozenset({S.QUEUED, S.APPLY_QUEUED})
# A run here starts its next phase (its plan, or its approved apply) only while no person holds
# the stack's managed state lock (`terraform apply` at a desk, a lock left for force-unlock):
# Terraform would fail at once on the lock. It stays in its status, shows why it waits
# (domain/state.py `lock_wait_reason`), starts when the lock is released, and can be canceled.
WAITS_FOR_STATE_LOCK: frozenset[RunStatus] = frozenset({S.QUEUED, S.APPLY_QUEUED})
# Waiting for a person's decision: approve (or discard) is possible only here.
APPROVABLE: frozenset[RunStatus] = frozenset({S.AWAITING_APPROVAL})
FINISHED: frozenset[RunStatus] = frozenset(s for s, exits in TRANSITIONS.items() if not exits)
ACTIVE: frozenset[RunStatus] = WAITING | HOLDS_LOCK

# A step in one of these statuses has ended.
FINISHED_STEP_STATUSES: frozenset[StepStatus] = frozenset(
    {StepStatus.DONE, StepStatus.FAILED, StepStatus.SKIPPED}
)

# Which phase an executor runs while the run is in a running status.
PHASE_OF_RUNNING_STATUS: dict[RunStatus, Phase] = {S.PLANNING: Phase.PLAN, S.APPLYING: Phase.APPLY}


def is_running_phase(status: str, attempt: int, phase: str, expected_attempt: int) -> bool:
    """Whether a run in `status` at `attempt` is still running that phase's attempt: an executor's
    reports, and a report of its death, only count while this holds."""
    running = PHASE_OF_RUNNING_STATUS.get(RunStatus(status))
    return running is not None and running.value == phase and attempt == expected_attempt


def can_transition(current: RunStatus | None, target: RunStatus) -> bool:
    """Whether the diagram has the arrow; `current` None is a run being created."""
    if current is None:
        return target is INITIAL
    return target in TRANSITIONS[current]


def check_transition(current: RunStatus | None, target: RunStatus) -> None:
    if not can_transition(current, target):
        raise InvalidTransition(current, target)


def status_after_plan(run_type: RunType, has_changes: bool, approval_required: bool) -> RunStatus:
    """Where a successful plan leads, read from the diagram's labels."""
    if not has_changes:
        return S.NO_CHANGES
    if run_type is RunType.PLAN:
        return S.PLANNED
    if run_type is RunType.DRIFT:
        return S.DRIFTED
    return S.AWAITING_APPROVAL if approval_required else S.APPLY_QUEUED
