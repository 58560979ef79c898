"""Counting the SQL statements an engine runs, to show that a cost does not grow with the data."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine.interfaces import CacheStats

from firstlume.db.engine import Database


class StatementCounter:
    def __init__(self, db: Database, *more: Database) -> None:
        """Counts on every engine given."""
        self.statements: list[str] = []
        # Statements SQLAlchemy compiled for this execution (no cache key, or not yet cached).
        self.compiled_anew: list[str] = []
        self._engines = [d.engine.sync_engine for d in (db, *more)]
        self._recording = False
        for engine in self._engines:
            event.listen(engine, "before_cursor_execute", self._on_execute)

    def _on_execute(
        self, _conn: Any, _cursor: Any, statement: str, _parameters: Any, context: Any, *_: Any
    ) -> None:
        if self._recording:
            self.statements.append(statement)
            if context.compiled is not None and context.cache_hit is not CacheStats.CACHE_HIT:
                self.compiled_anew.append(statement)

    @contextmanager
    def counting(self) -> Iterator[list[str]]:
        self.statements = []
        self.compiled_anew = []
        self._recording = True
        try:
            yield self.statements
        finally:
            self._recording = False

    def close(self) -> None:
        for engine in self._engines:
            event.remove(engine, "before_cursor_execute", self._on_execute)
