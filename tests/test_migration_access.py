"""Migration 0007_access on a database written by the revision before it: every existing member becomes an admin
(before roles, every member could do everything), tokens keep working, nothing else changes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from conftest import RUN_TAG, _pg_admin, _sqlalchemy_pg_url
from firstlume.db.migrate import alembic_config, upgrade

ROWS = [
    "INSERT INTO organizations (id, slug, name, created_at) VALUES ('o1', 'acme', 'Acme', '2026-01-01 00:00:00+00:00')",
    "INSERT INTO users (id, email, created_at) VALUES ('u1', 'ada@example.com', '2026-01-01 00:00:00+00:00')",
    "INSERT INTO users (id, email, created_at) VALUES ('u2', 'bob@example.com', '2026-01-01 00:00:00+00:00')",
    "INSERT INTO memberships (id, org_id, user_id, role) VALUES ('m1', 'o1', 'u1', 'member')",
    "INSERT INTO memberships (id, org_id, user_id, role) VALUES ('m2', 'o1', 'u2', 'member')",
    "INSERT INTO api_tokens (id, user_id, token_hash, name, created_at) VALUES ('t1', 'u1', 'h1', 'laptop', '2026-01-01 00:00:00+00:00')",
]
UNCHANGED = ["organizations", "users", "folders", "stacks", "variables", "runs"]


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
        return
    name = f"fl_{RUN_TAG}_mig_{uuid.uuid4().hex[:8]}"
    asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    yield _sqlalchemy_pg_url(name)
    asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def rows(url: str, table: str, columns: str = "*") -> list[tuple[str, ...]]:
    async def read() -> list[tuple[str, ...]]:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                result = await connection.execute(text(f"SELECT {columns} FROM {table}"))
                return sorted(tuple(map(repr, r)) for r in result)
        finally:
            await engine.dispose()

    return asyncio.run(read())


def column_names(url: str, table: str) -> str:
    """The table's columns now, for reading the same ones after later migrations added others."""

    async def read() -> str:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                result = await connection.execute(text(f"SELECT * FROM {table} LIMIT 0"))
                return ", ".join(result.keys())
        finally:
            await engine.dispose()

    return asyncio.run(read())


def run_sql(url: str, statements: list[str]) -> None:
    async def write() -> None:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as connection:
                for statement in statements:
                    await connection.execute(text(statement))
        finally:
            await engine.dispose()

    asyncio.run(write())


def test_existing_members_become_admins_and_nothing_else_changes(empty_database: str) -> None:
    upgrade(empty_database, "0007_drift")
    run_sql(empty_database, ROWS)
    # Later migrations add columns (new settings, new features): the ones there before stay as they were.
    columns = {t: column_names(empty_database, t) for t in UNCHANGED}
    before = {t: rows(empty_database, t, columns[t]) for t in UNCHANGED}
    tokens_before = rows(
        empty_database, "api_tokens", "id, user_id, token_hash, name, created_at, revoked_at"
    )

    upgrade(empty_database, "head")
    assert rows(empty_database, "memberships", "id, role") == [("'m1'", "'admin'"), ("'m2'", "'admin'")]
    groups = rows(empty_database, "memberships", "groups")
    assert all(g[0] in ("'[]'", "[]") for g in groups), groups
    assert (
        rows(empty_database, "api_tokens", "id, user_id, token_hash, name, created_at, revoked_at")
        == tokens_before
    )
    assert rows(empty_database, "api_tokens", "expires_at, last_used_at") == [("None", "None")]
    for table in UNCHANGED:
        if table == "runs":
            continue  # new columns only; no rows here
        assert rows(empty_database, table, columns[table]) == before[table], table

    # And back: the revision before again, its members as they were.
    command.downgrade(alembic_config(empty_database), "0007_drift")
    assert rows(empty_database, "memberships", "id, role") == [("'m1'", "'member'"), ("'m2'", "'member'")]
