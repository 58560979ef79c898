"""Waiting for live events to flow again after a broker's connections were cut."""

from __future__ import annotations

import time

from firstlume.protocol.events import Event
from firstlume.pubsub import PublishFailed, PubSub, Subscription
from support.waiting import until


async def publish_until_delivered(
    publisher: PubSub, events: Subscription, channel: str, event: Event, within: float = 30
) -> None:
    """Publishes `event` again and again until `events` receives it. The publisher's own connection
    may have been ended too (it refuses until it is back), and an event sent before the listener
    listens again is lost: then the next try counts."""

    async def delivered() -> bool:
        try:
            await publisher.publish(channel, event)
        except PublishFailed:
            return False
        deadline = time.monotonic() + 1
        while (left := deadline - time.monotonic()) > 0:
            if await events.next(seconds=left) == event:
                return True
        return False

    await until(delivered, within, "an event published after the connections came back")
