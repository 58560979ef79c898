"""The http backend protocol of managed state, request by request, on SQLite and PostgreSQL: a state
never goes backwards, the lock is Terraform's, phase tokens reach only their own stack, and what
is stored is sealed."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest

from conftest import Tenant, make_stack, make_tenant
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.runs import start

SECRET = "hunter2-state-secret-5b7"


def state_doc(serial: int, lineage: str = "lineage-a", value: str = "one") -> bytes:
    return json.dumps(
        {
            "version": 4,
            "terraform_version": "1.11.4",
            "serial": serial,
            "lineage": lineage,
            "outputs": {
                "endpoint": {"value": f"https://{value}", "type": "string"},
                "password": {"value": SECRET, "type": "string", "sensitive": True},
            },
            "resources": [
                {
                    "mode": "managed",
                    "type": "terraform_data",
                    "name": "a",
                    "instances": [{"attributes": {"input": value, "secret": SECRET}}],
                },
                {"mode": "data", "type": "x", "name": "d", "instances": [{"attributes": {}}]},
            ],
        }
    ).encode()


def lock_info(lock_id: str, who: str = "ada@laptop") -> str:
    return json.dumps({"ID": lock_id, "Operation": "OperationTypeApply", "Who": who, "Version": "1.11.4"})


@pytest.fixture
async def stack(ctx: Context, tenant: Tenant) -> str:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///nowhere"})
    return f"/api/v1/orgs/{tenant.org}/stacks/net/state"


async def test_a_state_is_stored_read_back_exactly_and_listed(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    h = tenant.headers
    assert (await client.get(stack, headers=h)).status_code == 404
    first = await client.post(stack, content=state_doc(1), headers=h)
    assert first.status_code == 200, first.text
    assert first.json()["stored"] is True and first.json()["resources"] == 1
    assert (await client.post(stack, content=state_doc(2, value="two"), headers=h)).status_code == 200
    current = await client.get(stack, headers=h)
    assert current.status_code == 200 and current.content == state_doc(2, value="two")
    versions = (await client.get(f"{stack}/versions", headers=h)).json()["versions"]
    assert [v["serial"] for v in versions] == [2, 1]
    assert versions[0]["created_by"] == tenant.email and versions[0]["run"] is None
    assert versions[0]["lineage"] == "lineage-a" and versions[0]["resources"] == 1
    assert versions[0]["created_at"].endswith("Z")
    old = await client.get(f"{stack}/versions/1", headers=h)
    assert old.content == state_doc(1)
    assert (await client.get(f"{stack}/versions/7", headers=h)).status_code == 404
    page = (await client.get(f"{stack}/versions?limit=1&before=2", headers=h)).json()["versions"]
    assert [v["serial"] for v in page] == [1]
    # The same version sent again (a retry) is no conflict and stores nothing new.
    again = await client.post(stack, content=state_doc(2, value="two"), headers=h)
    assert again.status_code == 200 and again.json()["stored"] is False


async def test_a_state_never_goes_backwards_and_a_refusal_stores_nothing(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    h = tenant.headers
    await client.post(stack, content=state_doc(5), headers=h)
    refusals = {
        "serial_behind": state_doc(4, value="older"),
        "serial_conflict": state_doc(5, value="other content"),
        "lineage_mismatch": state_doc(6, lineage="lineage-b"),
    }
    # Two writers at once: the refused ones race the reads.
    answers = await asyncio.gather(
        *(client.post(stack, content=body, headers=h) for body in refusals.values())
    )
    for code, answer in zip(refusals, answers, strict=True):
        assert answer.status_code == 409, answer.text
        assert answer.json()["error"]["code"] == code
    assert (await client.get(stack, headers=h)).content == state_doc(5)
    assert [v["serial"] for v in (await client.get(f"{stack}/versions", headers=h)).json()["versions"]] == [5]


async def test_the_lock_is_terraforms_and_writes_need_its_id(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    h = tenant.headers
    taken = await client.request("LOCK", f"{stack}/lock", content=lock_info("L1"), headers=h)
    assert taken.status_code == 200, taken.text
    assert (
        await client.request("LOCK", f"{stack}/lock", content=lock_info("L1"), headers=h)
    ).status_code == 200
    held = await client.request("LOCK", f"{stack}/lock", content=lock_info("L2", "bob"), headers=h)
    assert held.status_code == 423
    body = held.json()
    assert body["ID"].startswith("L1, held by ada@example.com") and body["Who"] == "ada@laptop"
    assert body["error"]["code"] == "state_locked" and body["error"]["lock"]["id"] == "L1"

    unlocked_write = await client.post(stack, content=state_doc(1), headers=h)
    assert unlocked_write.status_code == 423 and unlocked_write.json()["error"]["code"] == "state_locked"
    assert (await client.post(f"{stack}?ID=L2", content=state_doc(1), headers=h)).status_code == 423
    assert (await client.get(stack, headers=h)).status_code == 404
    assert (await client.post(f"{stack}?ID=L1", content=state_doc(1), headers=h)).status_code == 200

    wrong = await client.request("UNLOCK", f"{stack}/lock", content=lock_info("L2"), headers=h)
    assert wrong.status_code == 409 and wrong.json()["error"]["code"] == "lock_id_mismatch"
    assert (
        await client.request("UNLOCK", f"{stack}/lock", content=lock_info("L1"), headers=h)
    ).status_code == 200
    assert (await client.get(f"{stack}/lock", headers=h)).json() == {"lock": None}
    # A write naming a lock that is not held (force-unlocked meanwhile) is refused.
    stale = await client.post(f"{stack}?ID=L1", content=state_doc(2), headers=h)
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "lock_mismatch"

    await client.request("LOCK", f"{stack}/lock", content=lock_info("L3"), headers=h)
    forced = await client.delete(f"{stack}/lock", headers=h)
    assert forced.status_code == 200 and forced.json()["released"]["id"] == "L3"
    assert (await client.get(f"{stack}/lock", headers=h)).json() == {"lock": None}


async def test_basic_auth_takes_the_token_as_password(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    basic = "Basic " + base64.b64encode(f"whoever:{tenant.token}".encode()).decode()
    assert (
        await client.post(stack, content=state_doc(1), headers={"Authorization": basic})
    ).status_code == 200
    wrong = "Basic " + base64.b64encode(b"whoever:fl_wrong").decode()
    assert (await client.get(stack, headers={"Authorization": wrong})).status_code == 401
    assert (await client.get(stack)).status_code == 401


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"not json", "invalid_state"),
        (b"[]", "invalid_state"),
        (b'{"version": 4, "serial": 1}', "invalid_state"),
        (b'{"version": 4, "serial": -1, "lineage": "x"}', "invalid_state"),
        (b'{"version": 4, "serial": true, "lineage": "x"}', "invalid_state"),
    ],
)
async def test_bad_states_and_lock_infos_get_a_clear_4xx(
    client: httpx.AsyncClient, tenant: Tenant, stack: str, body: bytes, code: str
) -> None:
    answer = await client.post(stack, content=body, headers=tenant.headers)
    assert answer.status_code == 422 and answer.json()["error"]["code"] == code
    lock = await client.request("LOCK", f"{stack}/lock", content=b'{"Who": "x"}', headers=tenant.headers)
    assert lock.status_code == 422 and lock.json()["error"]["code"] == "invalid_lock_info"
    unknown = await client.post(f"{stack}?force=true", content=state_doc(1), headers=tenant.headers)
    assert unknown.status_code == 422


async def test_terragrunt_units_keep_states_of_their_own(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    h = tenant.headers
    unit = stack.replace("/state", "/units/live/vpc/state")
    await client.post(stack, content=state_doc(3), headers=h)
    assert (await client.post(unit, content=state_doc(1, lineage="vpc"), headers=h)).status_code == 200
    assert (await client.get(unit, headers=h)).content == state_doc(1, lineage="vpc")
    assert (await client.get(stack, headers=h)).content == state_doc(3)
    assert (
        await client.request("LOCK", f"{unit}/lock", content=lock_info("U"), headers=h)
    ).status_code == 200
    assert (await client.post(stack, content=state_doc(4), headers=h)).status_code == 200  # root unlocked
    bad = stack.replace("/state", "/units/a/../b/state")
    assert (await client.get(bad, headers=h)).status_code in (404, 422)


async def test_outputs_and_versions_never_show_a_sensitive_value(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    h = tenant.headers
    await client.post(stack, content=state_doc(1), headers=h)
    outputs = await client.get(f"{stack}/outputs", headers=h)
    assert outputs.json() == {
        "outputs": [
            {"name": "endpoint", "type": "string", "value": "https://one", "sensitive": False},
            {"name": "password", "type": "string", "value": "(sensitive)", "sensitive": True},
        ]
    }
    for path in ("/outputs", "/versions", "/lock"):
        assert SECRET not in (await client.get(stack + path, headers=h)).text


async def test_delete_purges_the_state_and_its_versions(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    h = tenant.headers
    await client.post(stack, content=state_doc(1), headers=h)
    await client.post(stack, content=state_doc(2), headers=h)
    deleted = await client.delete(stack, headers=h)
    assert deleted.status_code == 200 and deleted.json() == {"deleted_versions": 2}
    assert (await client.get(stack, headers=h)).status_code == 404
    # A new lineage may start over.
    assert (await client.post(stack, content=state_doc(1, lineage="fresh"), headers=h)).status_code == 200


async def test_a_phase_token_reaches_its_own_stack_only_during_its_phase(
    ctx: Context, client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    await make_stack(ctx, tenant, {"slug": "other", "repository": "file:///nowhere"})
    other = await make_tenant(ctx, "globex", "gus@example.com")
    await make_stack(ctx, other, {"slug": "net", "repository": "file:///nowhere"})
    await start(ctx, tenant.token, tenant.org, "net", "plan")
    [launch] = await dispatch.claim_plans(ctx)
    executor: dict[str, Any] = {"Authorization": f"Bearer {launch.token}"}

    assert (
        await client.request("LOCK", f"{stack}/lock", content=lock_info("R"), headers=executor)
    ).status_code == 200
    assert (await client.post(f"{stack}?ID=R", content=state_doc(1), headers=executor)).status_code == 200
    versions = (await client.get(f"{stack}/versions", headers=tenant.headers)).json()["versions"]
    assert versions[0]["run"] == {"id": launch.run_id, "number": 1, "phase": "plan"}
    assert versions[0]["created_by"] == "run #1 (plan phase)"
    lock = (await client.get(f"{stack}/lock", headers=tenant.headers)).json()["lock"]
    assert (
        lock["holder"] == "run #1 (plan phase)" and lock["run"] == launch.run_id and lock["phase"] == "plan"
    )

    # Reading, writing and locking is all an executor may do.
    for refused in (
        await client.delete(stack, headers=executor),
        await client.delete(f"{stack}/lock", headers=executor),
        await client.request("UNLOCK", f"{stack}/lock", headers=executor),
    ):
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert (await client.get(stack, headers=executor)).content == state_doc(1)

    for foreign in (
        stack.replace("/stacks/net/", "/stacks/other/"),
        stack.replace(f"/orgs/{tenant.org}/", "/orgs/globex/"),
    ):
        assert (await client.get(foreign, headers=executor)).status_code == 404
        assert (await client.post(foreign, content=state_doc(9), headers=executor)).status_code == 404

    await client.post(
        "/api/v1/executor/finish", json={"status": "failed", "error": "stop here"}, headers=executor
    )
    assert (await client.get(stack, headers=executor)).status_code == 401
    # The run's phase has ended: its lock holds nothing any more and is released on the next LOCK.
    retaken = await client.request("LOCK", f"{stack}/lock", content=lock_info("P"), headers=tenant.headers)
    assert retaken.status_code == 200, retaken.text
