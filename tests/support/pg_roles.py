"""A PostgreSQL login role of a test's own, with the rights a control plane needs on one
database, whose connection limit the test can turn down to 0: PostgreSQL then answers each new
session with SQLSTATE 53300 "too many connections", as it does when max_connections are taken."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg

from conftest import PG_SERVER, _asyncpg_url, _pg_admin


@dataclass
class LimitedRole:
    name: str
    dsn: str  # the database's libpq URL, as this role

    @property
    def url(self) -> str:
        """The SQLAlchemy URL (FIRSTLUME_DATABASE_URL)."""
        return "postgresql+asyncpg://" + self.dsn.split("://", 1)[1]

    async def refuse_new_sessions(self) -> None:
        """Connection limit 0, and the role's open sessions ended: only new ones are left to try."""
        await _pg_admin(
            f"ALTER ROLE {self.name} CONNECTION LIMIT 0",
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{self.name}'",
        )

    async def accept_sessions(self) -> None:
        await _pg_admin(f"ALTER ROLE {self.name} CONNECTION LIMIT -1")


@asynccontextmanager
async def limited_role(database: str) -> AsyncIterator[LimitedRole]:
    role = f"fl_limited_{uuid.uuid4().hex[:10]}"
    await _pg_admin(f"CREATE ROLE {role} LOGIN")
    try:
        grants = await asyncpg.connect(_asyncpg_url(database))
        try:
            await grants.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
            await grants.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
        finally:
            await grants.close()
        server = PG_SERVER.split("://", 1)[1].split("@", 1)[-1].rsplit("/", 1)[0]
        yield LimitedRole(role, f"postgresql://{role}@{server}/{database}")
    finally:
        # Its privileges go with it (DROP OWNED, in the database that granted them), then the role.
        admin = await asyncpg.connect(_asyncpg_url(database))
        try:
            await admin.execute(f"DROP OWNED BY {role}")
        finally:
            await admin.close()
        await _pg_admin(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'",
            f"DROP ROLE {role}",
        )
