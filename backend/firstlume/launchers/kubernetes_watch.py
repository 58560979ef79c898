"""List-then-watch of one kind of object (Jobs, pods), resumed after every hiccup.

The official client is synchronous: each blocking step of the stream runs in a thread of a pool
the caller owns, so stopping never waits for a long-poll to time out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes.client.exceptions import ApiException

from firstlume.launchers.kubernetes_failures import api_message

log = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable[None]]

_END = object()


def _next_event(stream: Iterator[dict[str, Any]]) -> Any:
    return next(stream, _END)


class ListWatch:
    """Hands every ADDED or MODIFIED object of `list_fn` to `handle`, from a full list onwards.

    After a (re)start, a 410 Gone (the resourceVersion was compacted away) or an error, it lists
    again: the list is what finds a Job that failed while nobody was watching. Deleted objects
    are not handed on; whoever keeps the list of running phases notices their absence."""

    def __init__(
        self,
        kind: str,
        list_fn: Callable[..., Any],
        handle: Handler,
        *,
        namespace: str,
        selector: str,
        watch_factory: Callable[[], Any],
        timeout_seconds: int,
        retry_delay: float,
    ) -> None:
        self.kind = kind
        self._list = list_fn
        self._handle = handle
        self._namespace = namespace
        self._selector = selector
        self._watch_factory = watch_factory
        self._timeout = timeout_seconds
        self._retry_delay = retry_delay
        self._stop = asyncio.Event()
        self._watches: set[Any] = set()

    async def run(self, pool: ThreadPoolExecutor) -> None:
        while not self._stop.is_set():
            try:
                result = await asyncio.to_thread(self._list, self._namespace, label_selector=self._selector)
                for item in result.items:
                    await self._handle(item)
                version = result.metadata.resource_version
                while not self._stop.is_set():
                    version = await self._watch_once(pool, version)
            except ApiException as exc:
                if exc.status == 410:
                    log.info("watch of %s expired (410 Gone); listing again", self.kind)
                    continue
                log.warning("watch of %s failed: %s; retrying", self.kind, api_message(exc))
                await self._pause()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("watch of %s failed; retrying", self.kind)
                await self._pause()

    def stop(self) -> None:
        self._stop.set()
        for watch in list(self._watches):
            watch.stop()

    async def _watch_once(self, pool: ThreadPoolExecutor, version: str) -> str:
        watch = self._watch_factory()
        self._watches.add(watch)
        loop = asyncio.get_running_loop()
        try:
            stream = watch.stream(
                self._list,
                self._namespace,
                label_selector=self._selector,
                resource_version=version,
                timeout_seconds=self._timeout,
                allow_watch_bookmarks=True,
            )
            while True:
                event = await loop.run_in_executor(pool, _next_event, stream)
                if event is _END:
                    break
                if event["type"] in ("ADDED", "MODIFIED"):
                    await self._handle(event["object"])
            return watch.resource_version or version
        finally:
            self._watches.discard(watch)

    async def _pause(self) -> None:
        try:
            await asyncio.wait_for(self._stop.wait(), timeout=self._retry_delay)
        except TimeoutError:
            pass
