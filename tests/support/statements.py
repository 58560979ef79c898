"""Counting the SQL statements an engine runs, to show that a cost does not grow with the data."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from firstlume.db.engine import Database


class StatementCounter:
    def __init__(self, db: Database) -> None:
        self.statements: list[str] = []
        self._engine = db.engine.sync_engine
        self._recording = False
        event.listen(self._engine, "before_cursor_execute", self._on_execute)

    def _on_execute(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if self._recording:
            self.statements.append(statement)

    @contextmanager
    def counting(self) -> Iterator[list[str]]:
        self.statements = []
        self._recording = True
        try:
            yield self.statements
        finally:
            self._recording = False

    def close(self) -> None:
        event.remove(self._engine, "before_cursor_execute", self._on_execute)
