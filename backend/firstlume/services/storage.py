"""Failures of the database's storage, told apart from bugs: a full disk, a database that only
reads, a connection that is gone. The API answers these with 503 and a sentence an operator can
act on (domain/errors.py StorageUnavailable), never with 500 `internal_error`."""

from __future__ import annotations

from collections.abc import Iterator

from firstlume.domain.errors import StorageUnavailable

# SQLSTATE: disk_full, insufficient_resources, out_of_memory; read_only_sql_transaction;
# admin_shutdown, crash_shutdown, cannot_connect_now (the server is restarting).
_FULL = {"53100", "53000"}
_READ_ONLY = {"25006"}
_GONE = {"57P01", "57P02", "57P03", "08000", "08003", "08006"}


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
                "Reads still work; retry the change later."
            )
        if state in _READ_ONLY or "readonly database" in text or "read-only" in text:
            return StorageUnavailable(
                "The database only accepts reads right now (read-only): nothing can be saved until "
                "an operator makes it writable again. Retry the change later."
            )
        if state in _GONE or type(item).__name__ in ("ConnectionDoesNotExistError", "ConnectionRefusedError"):
            return StorageUnavailable("The database connection was lost; retry in a moment.")
        if "disk i/o error" in text:
            return StorageUnavailable(
                "The database could not write to its disk (full, or failing): nothing can be saved "
                "until an operator frees space or repairs it. Reads still work; retry the change later."
            )
    return None
