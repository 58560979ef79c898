"""An open WebSocket whose next operation finds no database connection (its token is checked
again at each operation: services/access) is answered `storage_unavailable` in words, and is
served again once connections come back: never `internal_error`, never a closed socket."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from support.graphql_ws import GraphQLWebSocket, ws_url
from support.pg_roles import LimitedRole, limited_role

VIEWER = "{ viewer { email } }"


@pytest.fixture
async def role(database_url: str) -> AsyncIterator[LimitedRole]:
    async with limited_role(database_url.rsplit("/", 1)[1]) as limited:
        yield limited


@pytest.fixture
def server(role: LimitedRole, tmp_path: Path, tenant: Tenant) -> AsyncIterator[LiveServer]:
    served = start_live_server(
        settings_env(role.url, tmp_path / "data", FIRSTLUME_SCHEDULER="off"), tmp_path / "server.log"
    )
    yield served
    stop_live_server(served)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_an_operation_on_an_open_websocket_without_a_connection_is_told_to_retry(
    server: LiveServer, role: LimitedRole, tenant: Tenant
) -> None:
    async with GraphQLWebSocket.connect(ws_url(server.url), tenant.token) as ws:
        assert (await ws.execute(VIEWER))["data"] == {"viewer": {"email": tenant.email}}
        await role.refuse_new_sessions()
        refused = await ws.execute(VIEWER)
        assert refused["data"] is None
        [error] = refused["errors"]
        assert error["extensions"]["code"] == "storage_unavailable", refused
        assert "retry in a moment" in error["message"], refused
        await role.accept_sessions()
        assert (await ws.execute(VIEWER))["data"] == {"viewer": {"email": tenant.email}}
    transcript = "\n".join(ws.transcript)
    assert "internal_error" not in transcript and "Traceback" not in transcript
    assert "Traceback" not in server.log()
