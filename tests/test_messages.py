"""What the API and the CLI say when something is wrong (issue 40, items 11 and 12): each refusal
names what was expected and what arrived, in the documented shape, and the messages of things
that are not errors do not read like them."""

from __future__ import annotations

import base64
import logging
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from conftest import Tenant, _sqlalchemy_pg_url, make_stack
from firstlume.cli import main
from firstlume.services import accounts
from firstlume.services.access.roles import Role
from firstlume.services.context import Context

O = "/api/v1/orgs/acme"
CURL_FORM = "application/x-www-form-urlencoded"  # what `curl -d` sends


@pytest.fixture
async def stack(ctx: Context, tenant: Tenant) -> str:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    return "net"


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def refusal(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


# Validation ------------------------------------------------------------------------------------


async def test_an_invalid_trigger_names_the_triggers_there_are(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    for method, path, body in [
        ("POST", "/stacks", '{"slug": "web", "repository": "file:///r", "trigger": "sometimes"}'),
        ("PATCH", f"/stacks/{stack}", '{"trigger": "sometimes"}'),
    ]:
        response = await client.request(method, O + path, content=body, headers=tenant.headers)
        error = await refusal(response, 422)
        assert (error["field"], error["message"]) == (
            "trigger",
            "'trigger' must be one of manual, plan, apply; got 'sometimes'.",
        )


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/stacks/net", '{"name": null}', "name"),
        ("/stacks/net", '{"name": "Network", "branch": null}', "branch"),
        ("/stacks/net", '{"trigger": null}', "trigger"),
    ],
)
async def test_a_null_for_a_field_that_cannot_be_null_names_the_field(
    client: httpx.AsyncClient, tenant: Tenant, stack: str, path: str, body: str, field: str
) -> None:
    response = await client.patch(O + path, content=body, headers=tenant.headers)
    error = await refusal(response, 422)
    assert error["field"] == field
    assert error["message"] == f"'{field}' cannot be null; leave it out to keep the current value."


async def test_variable_values_come_back_as_the_json_values_that_were_set(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    values: dict[str, Any] = {
        "count": 41,
        "ratio": 0.5,
        "enabled": False,
        "zones": ["a", "b"],
        "tags": {"team": "net", "cost": 3},
        "label": "41",  # a string that reads as a number stays a string
    }
    for name, value in values.items():
        put = await client.put(f"{O}/variables/{name}", json={"value": value}, headers=tenant.headers)
        assert put.status_code == 200, put.text
        assert put.json()["value"] == value and type(put.json()["value"]) is type(value)
    listed = (await client.get(f"{O}/variables", headers=tenant.headers)).json()["variables"]
    assert {v["name"]: v["value"] for v in listed} == values


# Roles and credentials ---------------------------------------------------------------------------


async def test_a_role_refusal_says_an_operator(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    async with ctx.unit() as unit:
        operator = await accounts.create_token(unit.session, "acme", "olu@example.com", role=Role.OPERATOR)
        reader = await accounts.create_token(unit.session, "acme", "rae@example.com", role=Role.READER)
    response = await client.put(
        f"{O}/variables/region", json={"value": "eu"}, headers={"Authorization": f"Bearer {operator}"}
    )
    error = await refusal(response, 403)
    assert error["message"] == "This needs the admin role; you are an operator in this organization."
    response = await client.put(
        f"{O}/variables/region", json={"value": "eu"}, headers={"Authorization": f"Bearer {reader}"}
    )
    error = await refusal(response, 403)
    assert error["message"] == "This needs the admin role; you are a reader in this organization."


async def test_credentials_that_were_sent_are_not_answered_as_missing(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    missing = "Send an API token: 'Authorization: Bearer <token>'."
    assert (await refusal(await client.get(f"{O}/stacks"), 401))["message"] == missing
    # Basic credentials, right or wrong, on a route that takes only a bearer token.
    for headers in (basic("me", tenant.token), basic("me", "wrong")):
        error = await refusal(await client.get(f"{O}/stacks", headers=headers), 401)
        assert error["message"] == (
            "HTTP Basic credentials are accepted only by the state routes (Terraform's http backend); "
            "send the API token here as 'Authorization: Bearer <token>'."
        )
    error = await refusal(await client.get(f"{O}/stacks", headers={"Authorization": "Token abc"}), 401)
    assert (
        error["message"]
        == "'Token' authorization is not accepted; send an API token as 'Authorization: Bearer <token>'."
    )
    # The state routes take Basic (Terraform's http backend): each wrong form says what is wrong.
    state = f"{O}/stacks/{stack}/state/lock"
    assert (await client.get(state, headers=basic("me", tenant.token))).status_code == 200
    error = await refusal(await client.get(state, headers=basic("me", "wrong")), 401)
    assert error["message"] == accounts.INVALID_TOKEN
    error = await refusal(await client.get(state, headers=basic("me", "")), 401)
    assert error["message"] == (
        "The Basic credentials hold no password: send the API token as the password (any user name)."
    )
    error = await refusal(await client.get(state, headers={"Authorization": "Basic %%%"}), 401)
    assert error["message"].startswith("The Basic credentials are not base64 of 'user:password'")
    # GraphQL says the same.
    response = await client.post("/graphql", json={"query": "{ viewer { email } }"}, headers=basic("me", "x"))
    assert response.json()["errors"][0]["message"].startswith("HTTP Basic credentials are accepted only")


# HTTP -------------------------------------------------------------------------------------------


async def test_graphql_reads_a_curl_form_post_as_json(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post(
        "/graphql",
        content='{"query": "{ viewer { email } }"}',
        headers={**tenant.headers, "Content-Type": CURL_FORM},
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"data": {"viewer": {"email": "ada@example.com"}}}
    # What is not JSON is still refused as such.
    response = await client.post(
        "/graphql", content="query=x", headers={**tenant.headers, "Content-Type": CURL_FORM}
    )
    assert (
        response.status_code == 400 and response.json()["errors"][0]["extensions"]["code"] == "invalid_json"
    )


async def test_a_wrong_method_is_405_with_allow_and_an_unknown_path_404(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    response = await client.delete(f"{O}/stacks", headers=tenant.headers)
    error = await refusal(response, 405)
    assert response.headers["allow"] == "GET, HEAD, POST"
    assert (error["code"], error["allowed"]) == ("method_not_allowed", ["GET", "HEAD", "POST"])
    assert error["message"] == f"DELETE is not allowed on {O}/stacks; it takes GET, HEAD, POST."
    # Methods no route of the API takes at all, and Terraform's own on a path without them.
    response = await client.request("LOCK", f"{O}/stacks/{stack}", headers=tenant.headers)
    assert (await refusal(response, 405))["code"] == "method_not_allowed"
    response = await client.request(
        "LOCK", f"{O}/stacks/{stack}/state/lock", headers=tenant.headers, content="{}"
    )
    assert response.status_code != 405
    response = await client.get(f"{O}/nothing-here", headers=tenant.headers)
    assert (await refusal(response, 404))["code"] == "not_found"


@pytest.mark.parametrize("path", ["/api/v1/executor/logs", "/graphql"])
async def test_a_client_that_leaves_before_its_body_is_read_is_one_warning(
    app: Starlette, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    """An executor that exits with a log batch in flight: its connection drops before the body
    arrives. Nothing is done, and the log says so in one line, not as an error with a trace."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"authorization", b"Bearer fl_phase"), (b"content-length", b"100")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
        "app": app,
    }
    with caplog.at_level(logging.INFO):
        await app(scope, receive, send)
    ours = [r for r in caplog.records if r.name.startswith("firstlume")]
    assert [(r.levelno, r.exc_info) for r in ours] == [(logging.WARNING, None)], caplog.text
    assert ours[0].getMessage() == (
        f"POST {path}: the client closed the connection before its request was read; nothing was done"
    )


# CLI --------------------------------------------------------------------------------------------


def test_firstlume_version_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"firstlume {version('firstlume')}\n"


def test_org_create_on_postgresql_without_keys_is_a_message_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    monkeypatch.setenv("FIRSTLUME_DATABASE_URL", _sqlalchemy_pg_url("postgres"))
    monkeypatch.setenv("FIRSTLUME_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("FIRSTLUME_ENCRYPTION_KEYS", raising=False)
    assert main(["org", "create", "acme"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("firstlume: FIRSTLUME_ENCRYPTION_KEYS is required with PostgreSQL")
        and "Traceback" not in err
    )
    monkeypatch.setenv("FIRSTLUME_ENCRYPTION_KEYS", "not-a-key")
    assert main(["org", "create", "acme"]) == 2
    assert capsys.readouterr().err.startswith("firstlume: ")
