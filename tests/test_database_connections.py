"""When the database has no connection to give (the replica's pool is all in use, or PostgreSQL
refuses one more session: "too many clients"), requests are answered 503 `storage_unavailable`
with a sentence that says to retry, over REST and GraphQL, never 500 `internal_error`; and they
are served again as soon as a connection is free. PostgreSQL only: SQLite has no connections to
run out of. The pool's size is a setting (FIRSTLUME_DATABASE_POOL_SIZE, …_MAX_OVERFLOW,
…_POOL_TIMEOUT), so that several replicas can be made to fit one server's max_connections."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.applications import Starlette

from conftest import (
    PgDatabases,
    Tenant,
    _asyncpg_url,
    make_tenant,
    settings_env,
)
from firstlume.app import create_app
from firstlume.domain.errors import StorageUnavailable
from firstlume.services.storage import storage_failure
from firstlume.settings import Settings
from support.error_codes import acheck_error_codes
from support.pg_roles import limited_role

VIEWER = {"query": "{ viewer { email } }"}


@pytest.fixture
def pg_database(pg_databases: PgDatabases) -> Iterator[str]:
    name = pg_databases.take()
    yield name
    pg_databases.give_back(name)


@asynccontextmanager
async def served(settings: Settings) -> AsyncIterator[tuple[Starlette, httpx.AsyncClient]]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        hooks = {"response": [acheck_error_codes]}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver", event_hooks=hooks
        ) as client:
            yield app, client


def assert_no_free_connection(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    if "errors" in body:  # GraphQL
        code, message = body["errors"][0]["extensions"]["code"], body["errors"][0]["message"]
    else:  # REST
        code, message = body["error"]["code"], body["error"]["message"]
    assert code == "storage_unavailable", body
    assert "no free connection" in message and "retry in a moment" in message, message
    assert response.headers["retry-after"] == "5"


def test_a_pool_that_waited_in_vain_and_a_server_with_no_session_left_are_told_apart_from_bugs() -> None:
    busy = storage_failure(PoolTimeout("QueuePool limit of size 1 overflow 0 reached"))
    assert isinstance(busy, StorageUnavailable) and busy.kind == "busy"

    class TooManyConnections(Exception):
        sqlstate = "53300"

    assert storage_failure(RuntimeError("connect failed")) is None
    wrapped = RuntimeError("connect failed")
    wrapped.__cause__ = TooManyConnections("sorry, too many clients already")
    assert (found := storage_failure(wrapped)) is not None and found.kind == "busy"
    assert found.reason_prefix == "storage unavailable"
    assert found.what == "the database had no free connection"


async def test_requests_waiting_for_a_full_pool_get_503_in_words_then_are_served(
    pg_database: str, tmp_path: Path
) -> None:
    env = settings_env(
        "postgresql+asyncpg://" + _asyncpg_url(pg_database).split("://", 1)[1],
        tmp_path / "data",
        FIRSTLUME_SCHEDULER="off",
        FIRSTLUME_DATABASE_POOL_SIZE="1",
        FIRSTLUME_DATABASE_MAX_OVERFLOW="0",
        FIRSTLUME_DATABASE_POOL_TIMEOUT="0.3",
    )
    async with served(Settings.from_env(env)) as (app, client):
        tenant = await make_tenant(app.state.ctx, "acme", "ada@example.com")
        # The pool's one connection, held as a long request would hold it.
        async with app.state.ctx.db.read():
            assert_no_free_connection(await client.post("/graphql", json=VIEWER, headers=tenant.headers))
            assert_no_free_connection(
                await client.get(f"/api/v1/orgs/{tenant.org}/stacks", headers=tenant.headers)
            )
        answer = await client.post("/graphql", json=VIEWER, headers=tenant.headers)
        assert answer.status_code == 200 and answer.json()["data"]["viewer"]["email"] == tenant.email


async def test_a_server_that_refuses_another_session_gets_503_in_words_then_serves_again(
    pg_database: str, tmp_path: Path
) -> None:
    async with limited_role(pg_database) as role:
        env = settings_env(role.url, tmp_path / "data", FIRSTLUME_SCHEDULER="off")
        async with served(Settings.from_env(env)) as (app, client):
            tenant: Tenant = await make_tenant(app.state.ctx, "acme", "ada@example.com")
            await role.refuse_new_sessions()
            await app.state.ctx.db.engine.dispose()  # the pooled sessions go; new ones are refused
            assert_no_free_connection(await client.post("/graphql", json=VIEWER, headers=tenant.headers))
            assert_no_free_connection(
                await client.get(f"/api/v1/orgs/{tenant.org}/stacks", headers=tenant.headers)
            )
            await role.accept_sessions()
            answer = await client.post("/graphql", json=VIEWER, headers=tenant.headers)
            assert answer.status_code == 200, answer.text
