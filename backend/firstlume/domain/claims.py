"""Which claims a scheduler pass makes after a run's status changed.

A change for the scheduler makes at most one kind of phase startable: a run that becomes
`apply_queued` is its stack's lock holder and waits for an apply; any other (a run queued, a
lock freed as a run ends) can only let a stack's next plan start. A pass for that change claims
that kind alone: each claim is a transaction, and the two of a pass ran while the executor it
had just launched asked for its spec. Passes at the scheduler's interval claim both, whatever
the events said (an event may be missed).
"""

from __future__ import annotations

from typing import Literal

from firstlume.domain.runs import RunStatus

Claim = Literal["plans", "applies"]
PLANS: Claim = "plans"
APPLIES: Claim = "applies"
BOTH: frozenset[Claim] = frozenset({PLANS, APPLIES})


def claims_after(status: RunStatus | str | None) -> frozenset[Claim]:
    """The claims a change to `status` calls for; both when the status is not known."""
    if status is None:
        return BOTH
    return frozenset({APPLIES}) if status == RunStatus.APPLY_QUEUED else frozenset({PLANS})
