"""Reads of plain columns run on the session's connection, past the ORM (services/reads/rows.py):
they still see what the same unit of work has added or changed and not yet flushed, as a read
through the ORM would."""

from __future__ import annotations

import uuid

from firstlume.db.models import User
from firstlume.services.context import Context
from firstlume.services.reads import runs as run_reads


async def test_a_read_of_columns_sees_what_its_unit_of_work_has_not_flushed_yet(ctx: Context) -> None:
    async with ctx.db.transaction() as session:
        added = User(email="new@example.com")
        session.add(added)
        await session.flush()
        kept = User(email="old@example.com")
        session.add(kept)
        await session.flush()

        # Not flushed yet: one user added, another's email changed.
        pending = User(id=uuid.uuid4().hex, email="pending@example.com")
        session.add(pending)
        kept.email = "renamed@example.com"
        assert session.new and session.dirty

        assert await run_reads.emails(session, [pending.id, kept.id, added.id]) == [
            "pending@example.com",
            "renamed@example.com",
            "new@example.com",
        ]
