"""Failures of the database's storage, told apart from bugs: a full disk, a database that only
reads, a connection that is gone. The API answers these with 503 and a sentence an operator can
act on (domain/errors.py StorageUnavailable), never with 500 `internal_error`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from firstlume.domain.errors import StorageUnavailable

# SQLSTATE: disk_full, insufficient_resources, out_of_memory; read_only_sql_transaction;
# admin_shutdown, crash_shutdown, cannot_connect_now (the server is restarting).
_FULL = {"53100", "53000"}
_READ_ONLY = {"25006"}
_GONE = {"57P01", "57P02", "57P03", "08000", "08003", "08006"}
# too_many_connections: the server's max_connections are all taken (by this and other replicas).
_NO_CONNECTION_FREE = {"53300"}


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        item = pending.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        pending += [item.__cause__, item.__context__, getattr(item, "orig", None)]


def storage_failure(error: BaseException) -> StorageUnavailable | None:
    """The StorageUnavailable that `error` amounts to, or None when it is something else."""
    for item in _chain(error):
        state = str(getattr(item, "sqlstate", "") or getattr(item, "pgcode", "") or "")
        text = str(item).lower()
        if state in _FULL or "disk is full" in text or "no space left" in text or "file too large" in text:
            return StorageUnavailable(
                "The database's disk is full: nothing can be saved until an operator frees space. "
                "Reads still work; retry the change later.",
                kind="full",
            )
        if state in _READ_ONLY or "readonly database" in text or "read-only" in text:
            return StorageUnavailable(
                "The database only accepts reads right now (read-only): nothing can be saved until "
                "an operator makes it writable again. Retry the change later.",
                kind="read_only",
            )
        if state in _NO_CONNECTION_FREE or "too many clients" in text or _pool_exhausted(item):
            return StorageUnavailable(
                "The database has no free connection right now (every one is in use); retry in a "
                "moment. If this lasts, an operator should lower FIRSTLUME_DATABASE_POOL_SIZE and "
                "FIRSTLUME_DATABASE_MAX_OVERFLOW across replicas or raise the server's max_connections.",
                kind="busy",
            )
        if state in _GONE or type(item).__name__ in ("ConnectionDoesNotExistError", "ConnectionRefusedError"):
            return StorageUnavailable("The database connection was lost; retry in a moment.", kind="gone")
        if type(item).__name__ == "InternalClientError" and "another operation" in text:
            # asyncpg's words for a connection the server ended in the middle of a statement or
            # a commit (a restart, pg_terminate_backend): it is gone, like the cases above.
            return StorageUnavailable("The database connection was lost; retry in a moment.", kind="gone")
        if "disk i/o error" in text:
            return StorageUnavailable(
                "The database could not write to its disk (full, or failing): nothing can be saved "
                "until an operator frees space or repairs it. Reads still work; retry the change later.",
                kind="full",
            )
    return None


def _pool_exhausted(error: BaseException) -> bool:
    """SQLAlchemy's pool gave up waiting for one of its own connections (pool_timeout)."""
    return type(error).__name__ == "TimeoutError" and type(error).__module__ == "sqlalchemy.exc"


# How long after this process last met a storage failure /readyz still reports storage as
# unavailable, even when its own small probe write gets through: a disk with room for a probe
# row may have none for a run's log.
STORAGE_SETTLE_SECONDS = 10.0


def retry_after_headers(error: StorageUnavailable) -> dict[str, str]:
    return {"Retry-After": str(error.retry_after)}


class StorageWatch:
    """The last storage failure this process met (any request, any background service), for
    /readyz: a replica that cannot write says so, and Kubernetes stops routing to it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last: tuple[float, StorageUnavailable] | None = None

    def failed(self, error: StorageUnavailable) -> None:
        if error.kind == "gone":
            return  # a lost connection: the pool connects anew, the next request most likely works
        self._last = (self._clock(), error)

    def recent(self, within: float = STORAGE_SETTLE_SECONDS) -> StorageUnavailable | None:
        """The last failure, when it is at most `within` seconds old."""
        if self._last is None or self._clock() - self._last[0] > within:
            return None
        return self._last[1]
