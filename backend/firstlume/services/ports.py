"""What a committed unit of work tells this process's background services, as the services see
them: each is given to the Context when the app builds it (app.py), and is absent where the
process runs none (the CLI, most tests)."""

from __future__ import annotations

from typing import Protocol

from firstlume.domain.claims import Claim
from firstlume.launchers.base import PhaseLaunch


class Kickable(Protocol):
    """A service that works through rows a unit wrote (the outbox relay, the notification
    sender): kicked after the commit, it works now rather than at its next poll."""

    def kick(self) -> None: ...


class Notifier(Kickable, Protocol):
    """This process's notification sender (services/notifications/sender.py)."""

    async def attempt_now(self, delivery_id: str) -> None: ...


class SchedulerPort(Protocol):
    """This process's scheduler (scheduler/loop.py)."""

    @property
    def launching(self) -> bool:
        """Whether it launches phases claimed outside its passes: false once it stops, and a
        phase is then left queued for the next scheduler's pass."""
        ...

    def wake(self, claims: frozenset[Claim], changes: tuple[tuple[str, str], ...]) -> None:
        """A pass now for the kinds of phase `claims` names; `changes` (run id, status) are the
        committed changes that call for it, whose events need no pass of their own when they
        come back through the relay."""
        ...

    def launch_claimed(self, launches: list[PhaseLaunch]) -> None:
        """Launches phases claimed and committed outside a pass (a plan's result that claims its
        own apply: services/dispatch.py hand_over_apply)."""
        ...
