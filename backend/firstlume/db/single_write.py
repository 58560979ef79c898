"""A unit of work whose only write is one statement, run on PostgreSQL without BEGIN and COMMIT.

Starting a run is one statement (services/transitions.py: the run's number, its row, its first
history row, its audit entry and its outbox event). In a transaction, the stack's row lock that
numbers the run is held from that statement until the COMMIT, and the process sends the COMMIT
only once its event loop comes back to the request: under load, the starts of one stack took turns
at the pace of the busy process rather than the database's (16 connections starting runs of one
stack: a quarter of the floor's rate, against three tenths spread over 16 stacks). On its own
(autocommit), the statement commits as it ends and its lock goes with it; the BEGIN and COMMIT
round trips go too.

One statement is atomic, so nothing is half-written as long as it is the unit's only write. The
guard below keeps it so: before a statement runs in such a unit, it refuses any write but the one
the unit marks as its write (and that one only once), and any locking read, whose lock would end
with its own statement and protect nothing. SQLite needs none of this (a transaction there holds
the database's one write lock however it is written), so there the unit is a transaction.
"""

from __future__ import annotations

import re
from typing import Any

# The execution option that makes a connection's statements go through the guard (set by
# Database.single_write), and the one that marks a statement as the unit's write.
SINGLE_WRITE = "firstlume_single_write"
THE_WRITE = "firstlume_the_write"

_LOCKING_READ = re.compile(r"\bFOR\s+(?:NO\s+KEY\s+)?UPDATE\b|\bFOR\s+(?:KEY\s+)?SHARE\b", re.I)
_READ = re.compile(r"\s*(?:SELECT|SHOW)\b", re.I)


class SingleWriteBroken(RuntimeError):
    """A unit that writes with one statement tried to write otherwise: a programming error,
    raised before the statement runs."""


class OneWrite:
    """What a single-write unit has written so far: nothing, or its one statement."""

    def __init__(self) -> None:
        self.written = False

    def check(self, statement: str, context: Any) -> None:
        """Refuses `statement` (as SQLAlchemy compiled it, with its execution context) unless it
        reads without locking, or it is the unit's marked write and the first."""
        if _LOCKING_READ.search(statement):
            raise SingleWriteBroken(
                "a unit that writes with one statement took a row lock, which would end with its "
                f"own statement: {_first_line(statement)}"
            )
        writes = context.isinsert or context.isupdate or context.isdelete
        if not writes and not (context.is_text and not _READ.match(statement)):
            return
        if not context.execution_options.get(THE_WRITE):
            raise SingleWriteBroken(
                f"a unit that writes with one statement ran another write: {_first_line(statement)}"
            )
        if self.written:
            raise SingleWriteBroken(
                f"a unit that writes with one statement wrote twice: {_first_line(statement)}"
            )
        self.written = True


def guard(
    connection: Any, _cursor: Any, statement: str, _parameters: Any, context: Any, _executemany: bool
) -> None:
    """before_cursor_execute: checks the statements of single-write units (others pass at once)."""
    one_write: OneWrite | None = connection.get_execution_options().get(SINGLE_WRITE)
    if one_write is not None:
        one_write.check(statement, context)


def _first_line(statement: str) -> str:
    return " ".join(statement.split())[:120]
