"""docs/rest-api.md lists every error code the API can return, with its HTTP status, and lists
nothing else. The code's side is every FirstlumeError subclass of the control plane plus the codes
written as literals in api/; the tests' HTTP clients also check every error response they meet
(tests/support/error_codes.py), so a route returning an unlisted code fails the test that saw it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from conftest import Tenant
from support.error_codes import (
    acheck_error_codes,
    check_error_codes,
    documented_error_codes,
    error_classes,
    literal_codes,
    returnable_error_codes,
)


def test_every_code_the_api_can_return_is_in_the_docs_table_with_its_status() -> None:
    documented = documented_error_codes()
    returnable = returnable_error_codes()
    missing = sorted(set(returnable) - set(documented))
    assert not missing, f"add these codes to docs/rest-api.md's error code table: {missing}"
    for code, statuses in returnable.items():
        known = statuses - {None}
        assert known <= {documented[code]}, f"{code}: the table says {documented[code]}, the code {known}"


def test_every_code_in_the_docs_table_is_returned_by_something() -> None:
    stale = sorted(set(documented_error_codes()) - set(returnable_error_codes()))
    assert not stale, f"docs/rest-api.md lists codes nothing returns: {stale}"


def test_the_table_is_found_and_holds_the_codes_every_client_meets() -> None:
    documented = documented_error_codes()
    assert len(documented) >= 20
    for code, status in {
        "invalid_json": 400, "unauthenticated": 401, "not_found": 404, "invalid_status": 409,
        "invalid_request": 422, "state_locked": 423, "internal_error": 500,
    }.items():  # fmt: skip
        assert documented[code] == status


def test_error_classes_include_those_of_modules_nobody_imported_yet() -> None:
    names = {cls.__name__ for cls in error_classes()}
    assert {"LockHeldByOther", "StateLocked", "StateMoved", "LogGap", "InvalidJson"} <= names
    assert "CannotCancel" not in names  # one code for every refusal because of the run's status


def test_the_literal_scan_finds_codes_written_in_each_form(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        'a = {"code": "from_a_dict", "message": "m"}\n'
        'b = ConnectionRejectionError(code="from_a_keyword")\n'
        'c = error_response(418, "from_a_call", "m")\n'
        'd = {"kind": "not_a_code"}\n'
    )
    assert literal_codes(probe) == {"from_a_dict": None, "from_a_keyword": None, "from_a_call": 418}


def _response(status: int, body: str, path: str = "/api/v1/orgs/acme/runs") -> httpx.Response:
    request = httpx.Request("POST", "http://testserver" + path)
    return httpx.Response(
        status, content=body.encode(), headers={"content-type": "application/json"}, request=request
    )


async def test_the_clients_hook_fails_on_an_unlisted_code_and_passes_listed_ones() -> None:
    unlisted = _response(409, '{"error": {"code": "cannot_cancel", "message": "m"}}')
    with pytest.raises(AssertionError, match="cannot_cancel"):
        check_error_codes(unlisted)
    with pytest.raises(AssertionError, match="cannot_cancel"):
        await acheck_error_codes(_response(409, '{"error": {"code": "cannot_cancel", "message": "m"}}'))
    graphql = _response(200, '{"data": null, "errors": [{"extensions": {"code": "made_up"}}]}', "/graphql")
    with pytest.raises(AssertionError, match="made_up"):
        check_error_codes(graphql)
    check_error_codes(_response(409, '{"error": {"code": "invalid_status", "message": "m"}}'))
    check_error_codes(_response(200, '{"error": {"code": "anything"}}'))  # a 200 is no error


async def test_a_served_refusal_carries_a_listed_code(client: httpx.AsyncClient, tenant: Tenant) -> None:
    # Through the in-process client, whose hook checks the code against the table.
    response = await client.post("/api/v1/orgs/acme/stacks", headers=tenant.headers, content="{")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"
    response = await client.get("/api/v1/orgs/acme/nowhere", headers=tenant.headers)
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
