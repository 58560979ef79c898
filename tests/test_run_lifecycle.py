"""The lifecycle diagram of the documentation, checked without a database."""

from __future__ import annotations

import itertools

import pytest

from firstlume.domain.errors import InvalidTransition
from firstlume.domain.runs import (
    ACTIVE,
    CANCELABLE,
    FINISHED,
    HOLDS_LOCK,
    RUNNING,
    TRANSITIONS,
    WAITING,
    RunStatus,
    RunType,
    can_transition,
    check_transition,
    is_running_phase,
    status_after_plan,
)

S = RunStatus

# Read off the diagram in docs/runs-and-approval.txt, arrow by arrow.
DIAGRAM = {
    (S.QUEUED, S.PLANNING),
    (S.PLANNING, S.NO_CHANGES),
    (S.PLANNING, S.PLANNED),
    (S.PLANNING, S.AWAITING_APPROVAL),
    (S.AWAITING_APPROVAL, S.APPLY_QUEUED),
    (S.APPLY_QUEUED, S.APPLYING),
    (S.APPLYING, S.APPLIED),
    (S.AWAITING_APPROVAL, S.DISCARDED),
    (S.PLANNING, S.APPLY_QUEUED),
    (S.PLANNING, S.DRIFTED),
    # any running phase ─▶ failed
    (S.PLANNING, S.FAILED),
    (S.APPLYING, S.FAILED),
    # queued/apply_queued ─▶ canceled
    (S.QUEUED, S.CANCELED),
    (S.APPLY_QUEUED, S.CANCELED),
}


@pytest.mark.parametrize(("current", "target"), sorted(DIAGRAM))
def test_every_arrow_of_the_diagram_is_allowed(current: RunStatus, target: RunStatus) -> None:
    assert can_transition(current, target)
    check_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [pair for pair in itertools.product(RunStatus, RunStatus) if pair not in DIAGRAM],
)
def test_every_other_transition_is_refused(current: RunStatus, target: RunStatus) -> None:
    assert not can_transition(current, target)
    with pytest.raises(InvalidTransition) as raised:
        check_transition(current, target)
    assert raised.value.http_status == 409
    assert str(current) in raised.value.message and str(target) in raised.value.message


def test_table_has_exactly_the_diagram() -> None:
    table = {(a, b) for a, exits in TRANSITIONS.items() for b in exits}
    assert table == DIAGRAM
    assert set(TRANSITIONS) == set(RunStatus)


def test_groups_cover_every_state_once() -> None:
    groups = [WAITING, HOLDS_LOCK, FINISHED]
    assert set().union(*groups) == set(RunStatus)
    assert sum(len(g) for g in groups) == len(RunStatus)
    assert ACTIVE == WAITING | HOLDS_LOCK


def test_finished_states_have_no_exits() -> None:
    assert FINISHED == {S.NO_CHANGES, S.PLANNED, S.APPLIED, S.DISCARDED, S.DRIFTED, S.FAILED, S.CANCELED}
    for status in FINISHED:
        assert TRANSITIONS[status] == frozenset()


def test_lock_is_held_from_planning_until_the_end() -> None:
    assert HOLDS_LOCK == {S.PLANNING, S.AWAITING_APPROVAL, S.APPLY_QUEUED, S.APPLYING}
    assert RUNNING == {S.PLANNING, S.APPLYING}
    assert CANCELABLE == {S.QUEUED, S.APPLY_QUEUED}
    # Only running phases may fail; only queued ones may be canceled.
    assert {a for a, b in DIAGRAM if b == S.FAILED} == RUNNING
    assert {a for a, b in DIAGRAM if b == S.CANCELED} == CANCELABLE


@pytest.mark.parametrize(
    ("run_type", "has_changes", "approval", "expected"),
    [
        (RunType.PLAN, False, True, S.NO_CHANGES),
        (RunType.APPLY, False, True, S.NO_CHANGES),
        (RunType.DRIFT, False, False, S.NO_CHANGES),
        (RunType.PLAN, True, True, S.PLANNED),
        (RunType.PLAN, True, False, S.PLANNED),
        (RunType.DRIFT, True, True, S.DRIFTED),
        (RunType.APPLY, True, True, S.AWAITING_APPROVAL),
        (RunType.DESTROY, True, True, S.AWAITING_APPROVAL),
        (RunType.APPLY, True, False, S.APPLY_QUEUED),
        (RunType.DESTROY, True, False, S.APPLY_QUEUED),
    ],
)
def test_status_after_plan_follows_the_diagram_labels(
    run_type: RunType, has_changes: bool, approval: bool, expected: RunStatus
) -> None:
    target = status_after_plan(run_type, has_changes, approval)
    assert target == expected
    assert can_transition(S.PLANNING, target)


def test_an_executor_counts_only_while_its_phase_and_attempt_run() -> None:
    assert is_running_phase("planning", 1, "plan", 1)
    assert is_running_phase("applying", 2, "apply", 2)
    assert not is_running_phase("planning", 2, "plan", 1)  # a later attempt took over
    assert not is_running_phase("applying", 2, "plan", 2)  # the plan phase is over
    assert not is_running_phase("apply_queued", 1, "plan", 1)
    assert not is_running_phase("failed", 1, "plan", 1)
