"""What every use case needs, and the unit of work that publishes events after commit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.db.engine import Database
from firstlume.pubsub import PubSub
from firstlume.settings import Settings

if TYPE_CHECKING:
    from firstlume.services.logs import LogTails


@dataclass
class Unit:
    session: AsyncSession
    _events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def publish_after_commit(self, channel: str, message: dict[str, Any]) -> None:
        self._events.append((channel, message))


@dataclass
class Context:
    settings: Settings
    db: Database
    keyring: KeyRing
    pubsub: PubSub

    @cached_property
    def log_tails(self) -> LogTails:
        """This process's live log readers, one tail per run (services/logs.py)."""
        from firstlume.services.logs import LogTails

        return LogTails(self)

    @asynccontextmanager
    async def unit(self) -> AsyncIterator[Unit]:
        """A transaction; events recorded in it are published only once it has committed, so a
        subscriber never hears of a change it cannot read yet."""
        unit = Unit(session=None)  # type: ignore[arg-type]
        async with self.db.transaction() as session:
            unit.session = session
            yield unit
        for channel, message in unit._events:
            await self.pubsub.publish(channel, message)


@dataclass(frozen=True)
class Actor:
    """Who is calling: a user authenticated by an API token."""

    user_id: str
    email: str
