"""Subscriptions over real WebSockets (graphql-transport-ws) against the app served by uvicorn.

Most tests run the server with its scheduler off and drive the run themselves through the
executor HTTP API, with a phase token claimed from the server's database; the end-to-end ones
run the scheduler and the real executor with real Terraform and Git. The last one serves two
control planes on one PostgreSQL database."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect as ws_connect

from conftest import (
    LiveServer,
    Tenant,
    make_stack,
    make_tenant,
    settings_env,
    start_live_server,
    stop_live_server,
)
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.e2e import make_stack_repo
from support.executor_api import ExecutorReports
from support.graphql_ws import PROTOCOL, GraphQLWebSocket, Rejected, SubscriptionError, ws_url
from support.secrets import database_bytes
from support.terraform import requires_terraform

ORG = "acme"
RUN_LOG = """subscription($org: String!, $id: ID!, $step: String, $from: Int!) {
  runLog(org: $org, runId: $id, step: $step, fromOffset: $from) { text nextOffset } }"""
RUN_UPDATED = """subscription($org: String!, $id: ID!) { runUpdated(org: $org, runId: $id) {
  status awaitingApproval finished error steps { name status } summary { text } commit { sha } } }"""
RESOURCE_STATES = """subscription($org: String!, $id: ID!) { resourceStates(org: $org, runId: $id) {
  address action state error stages { action state } } }"""
ACTIVE_RUNS = """subscription($org: String!) { activeRuns(org: $org) {
  id status awaitingApproval queuePosition stack { slug } } }"""
START = """mutation($stack: String!, $type: RunType!) { startRun(org: "acme", stack: $stack, type: $type) {
  __typename ... on Run { id } } }"""
APPROVE = """mutation($id: ID!) { approveRun(org: "acme", runId: $id, acknowledged: []) { __typename ... on Run { status } } }"""

PLAN_JSON = {
    "format_version": "1.2",
    "resource_changes": [
        {
            "address": f"terraform_data.{name}",
            "mode": "managed",
            "type": "terraform_data",
            "name": name,
            "change": {
                "actions": ["create"],
                "before": None,
                "after": {"input": name},
                "after_unknown": {},
                "before_sensitive": False,
                "after_sensitive": {},
            },
        }
        for name in ("a", "b")
    ],
}


class Api:
    """GraphQL over HTTP against a served control plane."""

    def __init__(self, server: LiveServer, tenant: Tenant) -> None:
        self.url = server.url
        self.http = httpx.AsyncClient(base_url=server.url, headers=tenant.headers, timeout=30)
        self.responses: list[str] = []

    async def close(self) -> None:
        await self.http.aclose()

    async def query(self, query: str, **variables: Any) -> Any:
        response = await self.http.post("/graphql", json={"query": query, "variables": variables})
        self.responses.append(response.text)
        body = response.json()
        assert not body.get("errors"), body["errors"]
        return body["data"]

    async def start(self, stack: str, run_type: str) -> str:
        result = (await self.query(START, stack=stack, type=run_type.upper()))["startRun"]
        assert result["__typename"] == "Run", result
        return result["id"]  # type: ignore[no-any-return]

    def socket(self, token: str) -> Any:
        return GraphQLWebSocket.connect(ws_url(self.url), token)


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    served = start_live_server(
        settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off"), tmp_path / "server.log"
    )
    yield served
    stop_live_server(served)


@pytest.fixture
async def api(server: LiveServer, tenant: Tenant, ctx: Context) -> AsyncIterator[Api]:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    client = Api(server, tenant)
    yield client
    await client.close()


async def claim(ctx: Context, server: LiveServer, *, apply: bool = False) -> ExecutorReports:
    [launch] = await (dispatch.claim_applies(ctx) if apply else dispatch.claim_plans(ctx))
    return ExecutorReports.served(server.url, launch.token)


def text_of(messages: list[Any]) -> str:
    return "".join(m["runLog"]["text"] for m in messages)


# Logs -----------------------------------------------------------------------------------------


async def test_a_log_line_written_by_the_executor_reaches_the_subscriber(
    api: Api, ctx: Context, server: LiveServer, tenant: Tenant
) -> None:
    run_id = await api.start("net", "plan")
    executor = await claim(ctx, server)
    await executor.step("checkout", "running")
    await executor.log("checkout", "Cloning file:///repo\n")
    async with api.socket(tenant.token) as ws:
        log = await ws.subscribe(RUN_LOG, {"org": ORG, "id": run_id, "from": 0})
        # What was written before subscribing comes from the database...
        assert await log.next() == {"runLog": {"text": "Cloning file:///repo\n", "nextOffset": 21}}
        # ...and a line written now arrives live.
        await executor.log("checkout", "HEAD is now at 1a2b3c4 Add the network\n")
        assert await log.next() == {
            "runLog": {"text": "HEAD is now at 1a2b3c4 Add the network\n", "nextOffset": 60}
        }
        await executor.step("checkout", "done")
        await executor.plan(PLAN_JSON)
        assert await executor.finish() == "planned"
        assert await log.until_complete() == []
    await executor.close()


async def test_a_client_that_reconnects_from_its_offset_gets_every_line_exactly_once(
    api: Api, ctx: Context, server: LiveServer, tenant: Tenant
) -> None:
    run_id = await api.start("net", "plan")
    executor = await claim(ctx, server)
    lines = [f"line {i:04d}\n" for i in range(300)]

    async def write() -> None:
        await executor.step("plan", "running")
        for line in lines:
            await executor.log("plan", line)
        await executor.step("plan", "done")
        await executor.plan(PLAN_JSON)
        await executor.finish()

    writer = asyncio.create_task(write())
    async with api.socket(tenant.token) as first:
        log = await first.subscribe(RUN_LOG, {"org": ORG, "id": run_id, "from": 0})
        before = await log.until(
            lambda m: text_of([m]).count("\n") > 0 and m["runLog"]["nextOffset"] >= 100 * 10
        )
    # The socket is gone mid-run while the executor keeps writing.
    resume_from = before[-1]["runLog"]["nextOffset"]
    async with api.socket(tenant.token) as second:
        log = await second.subscribe(RUN_LOG, {"org": ORG, "id": run_id, "from": resume_from})
        after = await log.until_complete(within=60)
    await writer
    assert not writer.exception()
    received = text_of(before) + text_of(after)
    assert received == "".join(lines) == executor.written
    assert after and after[-1]["runLog"]["nextOffset"] == len(received)
    await executor.close()


async def test_many_subscribers_of_one_run_each_get_every_line_once_from_their_offsets(
    api: Api, ctx: Context, server: LiveServer, tenant: Tenant
) -> None:
    """Forty subscriptions over four sockets, joining before and during the run from offsets of
    their own (a line's start, the middle of a line, the end), all served by one tail."""
    run_id = await api.start("net", "plan")
    executor = await claim(ctx, server)
    await executor.step("plan", "running")
    starts = [0]
    for i in range(30):
        starts.append(executor.offset)
        await executor.log("plan", f"early line {i:03d}\n")
    async with contextlib.AsyncExitStack() as stack:
        sockets = [await stack.enter_async_context(api.socket(tenant.token)) for _ in range(4)]
        offsets = [0, starts[7], starts[7] + 5, executor.offset] * 5
        subscriptions = [
            (offset, await sockets[i % 4].subscribe(RUN_LOG, {"org": ORG, "id": run_id, "from": offset}))
            for i, offset in enumerate(offsets)
        ]
        for i in range(100):
            await executor.log("plan", f"live line {i:03d}\n")
            if i == 50:
                for j, offset in enumerate([starts[12], executor.offset - 3] * 10):
                    subscription = await sockets[j % 4].subscribe(
                        RUN_LOG, {"org": ORG, "id": run_id, "from": offset}
                    )
                    subscriptions.append((offset, subscription))
        await executor.step("plan", "done")
        await executor.plan(PLAN_JSON)
        assert await executor.finish() == "planned"
        for offset, subscription in subscriptions:
            messages = await subscription.until_complete(within=60)
            assert text_of(messages) == executor.written[offset:], offset
            if messages:
                assert messages[-1]["runLog"]["nextOffset"] == len(executor.written)
    assert len(subscriptions) == 40
    await executor.close()


async def test_a_step_log_carries_only_that_step_and_ends_with_it(
    api: Api, ctx: Context, server: LiveServer, tenant: Tenant
) -> None:
    run_id = await api.start("net", "plan")
    executor = await claim(ctx, server)
    async with api.socket(tenant.token) as ws:
        whole = await ws.subscribe(RUN_LOG, {"org": ORG, "id": run_id, "from": 0})
        init = await ws.subscribe(RUN_LOG, {"org": ORG, "id": run_id, "step": "init", "from": 0})
        await executor.step("checkout", "running")
        await executor.log("checkout", "checkout 1\n")
        await executor.step("checkout", "done")
        await executor.step("init", "running")
        await executor.log("init", "init 1\n")
        await executor.log("init", "init 2\n")
        await executor.step("init", "done")
        assert text_of(await init.until_complete()) == "init 1\ninit 2\n"
        await executor.step("plan", "running")
        await executor.log("plan", "plan 1\n")
        await executor.plan(PLAN_JSON)
        await executor.finish()
        assert text_of(await whole.until_complete()) == "checkout 1\ninit 1\ninit 2\nplan 1\n"
    await executor.close()


# Status, steps, resources, active runs ----------------------------------------------------------


def states_in_order(messages: list[list[dict[str, Any]]]) -> dict[str, list[str | None]]:
    """Each resource's states as the messages delivered them."""
    seen: dict[str, list[str | None]] = {}
    for message in messages:
        for change in message:
            seen.setdefault(change["address"], []).append(change["state"])
    return seen


def assert_monotonic(states: dict[str, list[str | None]]) -> None:
    order = [None, "PENDING", "APPLYING", "DONE"]
    for address, sequence in states.items():
        ranks = [order.index(s) for s in sequence]
        assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks), (address, sequence)


async def test_status_steps_and_resource_states_follow_the_run_until_it_ends(
    api: Api, ctx: Context, server: LiveServer, tenant: Tenant
) -> None:
    run_id = await api.start("net", "apply")
    planner = await claim(ctx, server)
    async with api.socket(tenant.token) as ws:
        updates = await ws.subscribe(RUN_UPDATED, {"org": ORG, "id": run_id})
        resources = await ws.subscribe(RESOURCE_STATES, {"org": ORG, "id": run_id})
        assert (await updates.next())["runUpdated"]["status"] == "PLANNING"
        assert await resources.next() == {"resourceStates": []}
        await planner.step("plan", "running")
        assert await updates.until(
            lambda m: m["runUpdated"]["steps"] == [{"name": "plan", "status": "RUNNING"}]
        )
        await planner.plan(PLAN_JSON)
        await planner.step("plan", "done")
        await planner.finish()
        awaiting = await updates.until(lambda m: m["runUpdated"]["status"] == "AWAITING_APPROVAL")
        assert awaiting[-1]["runUpdated"]["awaitingApproval"] is True
        assert awaiting[-1]["runUpdated"]["summary"] == {"text": "2 create"}
        planned = await resources.until(lambda m: len(m["resourceStates"]) == 2)
        assert {c["address"]: c["state"] for c in planned[-1]["resourceStates"]} == {
            "terraform_data.a": None, "terraform_data.b": None,
        }  # fmt: skip

        # Approval over the same socket: every change becomes pending.
        approved = await ws.execute(APPROVE, {"id": run_id})
        assert approved["data"]["approveRun"] == {"__typename": "Run", "status": "APPLY_QUEUED"}
        pending = await resources.next()
        assert {c["state"] for c in pending["resourceStates"]} == {"PENDING"}

        applier = await claim(ctx, server, apply=True)
        await applier.step("apply", "running")
        for update in [
            {"address": "terraform_data.a", "state": "applying"},
            {"address": "terraform_data.a", "state": "done"},
            {"address": "terraform_data.b", "state": "applying"},
            {"address": "terraform_data.b", "state": "done"},
        ]:
            await applier.post("resources", {"updates": [{**update, "error": None, "stages": []}]})
        await applier.step("apply", "done")
        assert await applier.finish() == "applied"

        rest = await updates.until_complete()
        assert rest[-1]["runUpdated"]["status"] == "APPLIED" and rest[-1]["runUpdated"]["finished"] is True
        assert [(s["name"], s["status"]) for s in rest[-1]["runUpdated"]["steps"]] == [
            ("plan", "DONE"), ("approval", "DONE"), ("apply", "DONE"),
        ]  # fmt: skip
        statuses = [m["runUpdated"]["status"] for m in awaiting + rest]
        runs_of_statuses = [s for i, s in enumerate(statuses) if i == 0 or statuses[i - 1] != s]
        assert len(runs_of_statuses) == len(set(runs_of_statuses)), statuses  # never goes back
        applied = [
            pending["resourceStates"],
            *[m["resourceStates"] for m in await resources.until_complete()],
        ]
        states = states_in_order(applied)
        assert_monotonic(states)
        assert {a: s[-1] for a, s in states.items()} == {
            "terraform_data.a": "DONE",
            "terraform_data.b": "DONE",
        }
    await planner.close()
    await applier.close()


async def test_active_runs_are_listed_live_with_approval_highlighted(
    api: Api, ctx: Context, server: LiveServer, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "dns", "repository": "file:///repo"})
    async with api.socket(tenant.token) as ws:
        active = await ws.subscribe(ACTIVE_RUNS, {"org": ORG})
        assert await active.next() == {"activeRuns": []}
        first = await api.start("net", "apply")
        second = await api.start("net", "plan")
        listed = await active.until(lambda m: len(m["activeRuns"]) == 2)
        assert [(r["id"], r["status"], r["queuePosition"]) for r in listed[-1]["activeRuns"]] == [
            (first, "QUEUED", 1), (second, "QUEUED", 2),
        ]  # fmt: skip
        executor = await claim(ctx, server)
        await executor.plan(PLAN_JSON)
        await executor.finish()
        highlighted = await active.until(lambda m: any(r["awaitingApproval"] for r in m["activeRuns"]))
        third = await api.start("dns", "plan")
        listed = await active.until(lambda m: len(m["activeRuns"]) == 3)
        assert highlighted[-1]["activeRuns"] == listed[-1]["activeRuns"][:2]
        assert [(r["id"], r["status"], r["awaitingApproval"], r["queuePosition"]) for r in listed[-1]["activeRuns"]] == [
            (first, "AWAITING_APPROVAL", True, None), (second, "QUEUED", False, 1), (third, "QUEUED", False, 1),
        ]  # fmt: skip
        canceled = await ws.execute(
            'mutation($id: ID!) { cancelRun(org: "acme", runId: $id) { __typename } }', {"id": second}
        )
        assert canceled["data"]["cancelRun"]["__typename"] == "Run"
        after = await active.until(lambda m: second not in [r["id"] for r in m["activeRuns"]])
        assert [r["id"] for r in after[-1]["activeRuns"]] == [first, third]
        await executor.close()


# Authentication and isolation ------------------------------------------------------------------


async def test_websockets_need_a_valid_token_and_see_only_their_organization(
    api: Api, ctx: Context, server: LiveServer, tenant: Tenant
) -> None:
    url = ws_url(server.url)
    for payload in (
        {},
        {"authorization": "Bearer fl_wrong"},
        {"authorization": tenant.token},
        {"token": tenant.token},
    ):
        with pytest.raises(Rejected) as refused:
            async with GraphQLWebSocket.connect(url, payload=payload):
                pass
        assert refused.value.code == 4403
    async with GraphQLWebSocket.connect(url, payload={"Authorization": f"Bearer {tenant.token}"}) as ws:
        assert (await ws.execute("{ viewer { email } }"))["data"] == {"viewer": {"email": tenant.email}}
    async with GraphQLWebSocket.connect(url, payload={}, headers=tenant.headers) as ws:
        assert (await ws.execute("{ viewer { email } }"))["data"] == {"viewer": {"email": tenant.email}}

    other = await make_tenant(ctx, "globex", "grace@example.com")
    await make_stack(ctx, other, {"slug": "hidden", "repository": "file:///globex"})
    mine = await api.start("net", "plan")
    async with GraphQLWebSocket.connect(url, other.token) as ws:
        for query, variables in [
            (RUN_LOG, {"org": ORG, "id": mine, "from": 0}),
            (RUN_LOG, {"org": "globex", "id": mine, "from": 0}),
            (RUN_UPDATED, {"org": ORG, "id": mine}),
            (RESOURCE_STATES, {"org": "globex", "id": mine}),
            (ACTIVE_RUNS, {"org": ORG}),
        ]:
            subscription = await ws.subscribe(query, variables)
            payload = await subscription.next_payload()
            assert payload["data"] is None
            assert [e["extensions"]["code"] for e in payload["errors"]] == ["not_found"]
        bad = await ws.subscribe(RUN_LOG, {"org": "globex", "id": mine, "from": -5})
        assert [e["extensions"]["code"] for e in (await bad.next_payload())["errors"]] == ["invalid_request"]
        with pytest.raises(SubscriptionError):
            await (await ws.subscribe("subscription { nope }")).next_payload()
    transcript = "\n".join(ws.transcript)
    assert "net" not in transcript.replace("not_found", "") and "Traceback" not in transcript


async def test_a_client_offering_compression_is_served_without_it(server: LiveServer, tenant: Tenant) -> None:
    # permessage-deflate keeps a zlib compressor and decompressor per connection, about 40 KB
    # of a watcher's memory (README, Fleet scale, F4): the server declines it.
    async with ws_connect(
        ws_url(server.url), subprotocols=[PROTOCOL], compression="deflate", ping_interval=None
    ) as raw:
        assert raw.response is not None
        assert "Sec-WebSocket-Extensions" not in raw.response.headers
        await raw.send(
            json.dumps({"type": "connection_init", "payload": {"authorization": f"Bearer {tenant.token}"}})
        )
        assert json.loads(await raw.recv())["type"] == "connection_ack"


# Real Terraform, served with its scheduler ------------------------------------------------------

GATED = """
resource "terraform_data" "first" { input = "one" }
resource "terraform_data" "gated" {
  input      = "two"
  depends_on = [terraform_data.first]
  provisioner "local-exec" {
    command = "while [ ! -f '{gate}' ]; do sleep 0.05; done"
  }
}
resource "terraform_data" "last" {
  input      = "three"
  depends_on = [terraform_data.gated]
}
"""


@pytest.fixture
def scheduled_server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    served = start_live_server(settings_env(database_url, tmp_path / "data"), tmp_path / "server.log")
    yield served
    stop_live_server(served)


@requires_terraform
async def test_resource_states_arrive_in_order_during_a_real_apply(
    scheduled_server: LiveServer, tenant: Tenant, ctx: Context, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    repo = make_stack_repo(tmp_path, GATED.replace("{gate}", str(gate)))
    await make_stack(ctx, tenant, {"slug": "app", "repository": repo.url, "path": repo.subdir})
    api = Api(scheduled_server, tenant)
    run_id = await api.start("app", "apply")
    async with api.socket(tenant.token) as ws:
        updates = await ws.subscribe(RUN_UPDATED, {"org": ORG, "id": run_id})
        await updates.until(lambda m: m["runUpdated"]["status"] == "AWAITING_APPROVAL", within=120)
        resources = await ws.subscribe(RESOURCE_STATES, {"org": ORG, "id": run_id})
        log = await ws.subscribe(RUN_LOG, {"org": ORG, "id": run_id, "step": "apply", "from": 0})
        initial = (await resources.next())["resourceStates"]
        assert sorted(c["address"] for c in initial) == [
            "terraform_data.first",
            "terraform_data.gated",
            "terraform_data.last",
        ]
        assert (await ws.execute(APPROVE, {"id": run_id}))["data"]["approveRun"]["status"] == "APPLY_QUEUED"

        # Terraform holds `gated` in its provisioner until the gate opens: the states seen by then
        # were sent during the apply, not read after it.
        messages = [initial]
        view: dict[str, str | None] = {c["address"]: c["state"] for c in initial}

        def gated_applying(message: dict[str, Any]) -> bool:
            messages.append(message["resourceStates"])
            view.update({c["address"]: c["state"] for c in message["resourceStates"]})
            return view["terraform_data.gated"] == "APPLYING"

        await resources.until(gated_applying, within=120)
        assert view == {
            "terraform_data.first": "DONE",
            "terraform_data.gated": "APPLYING",
            "terraform_data.last": "PENDING",
        }
        gate.touch()
        messages += [m["resourceStates"] for m in await resources.until_complete(within=120)]
        states = states_in_order(messages)
        assert_monotonic(states)
        assert (
            states["terraform_data.first"][-2:] == ["APPLYING", "DONE"]
            or states["terraform_data.first"][-1] == "DONE"
        )
        assert {a: s[-1] for a, s in states.items()} == dict.fromkeys(view, "DONE")
        assert "PENDING" in states["terraform_data.last"]
        final = await updates.until_complete(within=60)
        assert final[-1]["runUpdated"]["status"] == "APPLIED"
        assert "Apply complete!" in text_of(await log.until_complete(within=60))
    await api.close()


SECRET = "s3cr3t-value-never-shown"
# Sensitive in Firstlume, taken by a Terraform variable that is not declared sensitive.
PLAIN_SECRET = "pl41n-tf-var-but-firstlume-secret"
# A JSON-valued sensitive variable: each leaf is a secret of its own.
DB_SECRET = {"user": "dbadmin-leaf-user", "password": "pw-leaf-7c1d-inside-object"}
GIT_TOKEN = "ghp_gitTokenNeverShown0123456789abcdef"
SSH_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBsZWFrZWQtc3NoLWtleS1uZXZlci1zaG93bi1hbnl3aGVyZQAAAJgAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)
WITH_SECRET = """
variable "secret" {
  type      = string
  sensitive = true
}
variable "plain_secret" {
  type = string
}
variable "db" {
  type = object({ user = string, password = string })
}
resource "terraform_data" "uses_secret" { input = var.secret }
resource "terraform_data" "plain" {
  input = "length ${length(var.secret)}"
  provisioner "local-exec" {
    command = "echo token=${var.secret}"
  }
}
resource "terraform_data" "uses_plain_secret" {
  input = { exact = var.plain_secret, inside = "prefix-${var.plain_secret}-suffix" }
  provisioner "local-exec" {
    command = "echo plain=${var.plain_secret}"
  }
}
resource "terraform_data" "uses_db" {
  input = var.db
  provisioner "local-exec" {
    command = "echo db=${var.db.password} user=${var.db.user} all=${jsonencode(var.db)}"
  }
}
"""


def secret_needles() -> list[str]:
    ssh_lines = [line for line in SSH_KEY.splitlines() if line and not line.startswith("-----")]
    return [SECRET, PLAIN_SECRET, *DB_SECRET.values(), GIT_TOKEN, *ssh_lines]


@requires_terraform
async def test_no_sensitive_value_reaches_any_response_or_message(
    scheduled_server: LiveServer, tenant: Tenant, ctx: Context, tmp_path: Path, database_url: str
) -> None:
    repo = make_stack_repo(tmp_path, WITH_SECRET)
    api = Api(scheduled_server, tenant)
    create = """mutation($input: CreateStackInput!) { createStack(org: "acme", input: $input) {
        __typename ... on Stack { slug } } }"""
    stack = {"slug": "app", "repository": repo.url, "path": repo.subdir, "folder": "prod"}
    stack |= {"gitHttpsToken": GIT_TOKEN, "gitSshKey": SSH_KEY}
    assert (await api.query(create, input=stack))["createStack"] == {"__typename": "Stack", "slug": "app"}
    set_secret = """mutation($name: String!, $value: JSON!) {
        setVariable(org: "acme", name: $name, value: $value, sensitive: true, folder: "prod") {
        ... on Variable { name value sensitive } } }"""
    for name, value in (("secret", SECRET), ("plain_secret", PLAIN_SECRET), ("db", DB_SECRET)):
        assert (await api.query(set_secret, name=name, value=value))["setVariable"] == {
            "name": name,
            "value": None,
            "sensitive": True,
        }
    async with api.socket(tenant.token) as ws:
        active = await ws.subscribe(
            ACTIVE_RUNS.replace("stack { slug }", "stack { slug variables { name value } }"), {"org": ORG}
        )
        await active.next()
        run_id = await api.start("app", "apply")
        subscriptions = [
            await ws.subscribe(RUN_LOG, {"org": ORG, "id": run_id, "from": 0}),
            await ws.subscribe(
                RUN_UPDATED.replace("commit { sha }", "configuration { variables { name origin } }"),
                {"org": ORG, "id": run_id},
            ),
            await ws.subscribe(
                RESOURCE_STATES.replace("error", "error attributes { name before after }"),
                {"org": ORG, "id": run_id},
            ),
        ]
        await subscriptions[1].until(lambda m: m["runUpdated"]["status"] == "AWAITING_APPROVAL", within=120)
        assert (await ws.execute(APPROVE, {"id": run_id}))["data"]["approveRun"]["status"] == "APPLY_QUEUED"
        for subscription in subscriptions:
            await subscription.until_complete(within=120)
        await active.until(lambda m: m["activeRuns"] == [], within=60)
        details = await api.query(
            """query($id: ID!) { organization(slug: "acme") {
                 variables { name value } folder(path: "prod") { variables { name value sensitive } }
                 stack(slug: "app") { repository }
                 run(id: $id) { status error log { text } configuration { variables { name origin sensitive } }
                   changes { groups { changes { address attributes { name before after } } } } } } }""",
            id=run_id,
        )
        assert details["organization"]["run"]["status"] == "APPLIED", details["organization"]["run"]["error"]
        assert {v["name"] for v in details["organization"]["run"]["configuration"]["variables"]} == {
            "secret",
            "plain_secret",
            "db",
        }
    # The secrets were really used, the object as an object...
    resources = repo.resources()
    assert resources["terraform_data.uses_secret"]["input"]["value"] == SECRET
    assert resources["terraform_data.uses_plain_secret"]["input"]["value"]["exact"] == PLAIN_SECRET
    assert resources["terraform_data.uses_db"]["input"]["value"] == DB_SECRET
    # ...and appear in no REST response,
    paths = ["/stacks", "/stacks/app", f"/runs/{run_id}", f"/runs/{run_id}/changes", f"/runs/{run_id}/logs"]
    async with httpx.AsyncClient(
        base_url=f"{scheduled_server.url}/api/v1/orgs/acme", headers=tenant.headers, timeout=30
    ) as rest:
        rest_texts = [(await rest.get(path)).text for path in paths]
    assert "Apply complete!" in rest_texts[-1] and "***" in rest_texts[-1]
    # GraphQL response or subscription message (WebSocket frame), log file or database byte.
    everything = [*api.responses, *ws.transcript, *rest_texts]
    assert len(ws.transcript) > 10
    data_dir = Path(scheduled_server.env["FIRSTLUME_DATA_DIR"])
    files = [scheduled_server.log_path, *sorted((data_dir / "executors").glob("*.log"))]
    assert len(files) >= 3
    everything += [path.read_text(errors="replace") for path in files]
    stored = database_bytes(database_url)
    for needle in secret_needles():
        assert not [text for text in everything if needle in text], needle
        assert needle.encode() not in stored, needle
    await api.close()


# Two control planes ----------------------------------------------------------------------------


@requires_terraform
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_subscriber_on_one_process_follows_a_run_executed_through_another(
    database_url: str, tenant: Tenant, ctx: Context, tmp_path: Path
) -> None:
    repo = make_stack_repo(
        tmp_path,
        'resource "terraform_data" "one" { input = "1" }\nresource "terraform_data" "two" { input = "2" }\n',
    )
    await make_stack(ctx, tenant, {"slug": "app", "repository": repo.url, "path": repo.subdir})
    # A only serves subscribers; B runs the scheduler, launches the executor and takes its reports.
    a = start_live_server(
        settings_env(database_url, tmp_path / "a", FIRSTLUME_SCHEDULER="off"), tmp_path / "a.log"
    )
    b = start_live_server(settings_env(database_url, tmp_path / "b"), tmp_path / "b.log")
    try:
        api_a, api_b = Api(a, tenant), Api(b, tenant)
        async with api_a.socket(tenant.token) as ws:
            active = await ws.subscribe(ACTIVE_RUNS, {"org": ORG})
            assert await active.next() == {"activeRuns": []}
            run_id = await api_b.start("app", "apply")
            updates = await ws.subscribe(RUN_UPDATED, {"org": ORG, "id": run_id})
            log = await ws.subscribe(RUN_LOG, {"org": ORG, "id": run_id, "from": 0})
            resources = await ws.subscribe(RESOURCE_STATES, {"org": ORG, "id": run_id})
            await active.until(
                lambda m: [r["status"] for r in m["activeRuns"]] == ["AWAITING_APPROVAL"], within=120
            )
            await updates.until(lambda m: m["runUpdated"]["status"] == "AWAITING_APPROVAL", within=120)
            assert (await api_b.query(APPROVE, id=run_id))["approveRun"]["status"] == "APPLY_QUEUED"
            statuses = [m["runUpdated"]["status"] for m in await updates.until_complete(within=120)]
            assert statuses[-1] == "APPLIED" and "APPLYING" in statuses
            text = text_of(await log.until_complete(within=60))
            assert "terraform_data.one will be created" in text and "Apply complete!" in text
            states = states_in_order([m["resourceStates"] for m in await resources.until_complete(within=60)])
            assert_monotonic(states)
            assert {a: s[-1] for a, s in states.items()} == {
                "terraform_data.one": "DONE",
                "terraform_data.two": "DONE",
            }
            await active.until(lambda m: m["activeRuns"] == [], within=60)
        await api_a.close()
        await api_b.close()
    finally:
        stop_live_server(a)
        stop_live_server(b)
