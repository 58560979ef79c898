"""The served control plane polls by itself: two replicas (uvicorn processes with their
schedulers) on one database, FIRSTLUME_GIT_POLL_INTERVAL=0.5, a push to a smart-HTTP Git server:
one run, within a few intervals, found by one poll."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from support.git_http import GitHttpServer
from support.git_repos import commit_files, make_bare, make_repo, push
from support.waiting import wait_until

TOKEN = "ghp_served_token_0c4e"
MAIN_TF = 'resource "terraform_data" "a" {}\n'


@pytest.fixture
def replicas(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[list[LiveServer]]:
    served: list[LiveServer] = []
    try:
        for name in ("a", "b"):
            env = settings_env(database_url, tmp_path / f"data-{name}", FIRSTLUME_GIT_POLL_INTERVAL="0.5")
            served.append(start_live_server(env, tmp_path / f"server-{name}.log"))
        yield served
    finally:
        for server in served:
            stop_live_server(server)


def test_two_served_replicas_polling_start_one_run_within_a_few_intervals(
    replicas: list[LiveServer], tenant: Tenant, tmp_path: Path
) -> None:
    server = GitHttpServer(tmp_path / "srv", token=TOKEN)
    with server.running(), httpx.Client(headers=tenant.headers, timeout=30) as http:
        make_bare(tmp_path / "srv" / "infra")
        work = tmp_path / "work"
        make_repo(work, {"infra/main.tf": MAIN_TF})
        url = server.url("infra")
        push(work, url, token=TOKEN)
        o = f"{replicas[0].url}/api/v1/orgs/{tenant.org}"
        body = {
            "slug": "net",
            "repository": url,
            "path": "infra",
            "trigger": "plan",
            "git_https_token": TOKEN,
        }
        assert http.post(f"{o}/stacks", content=json.dumps(body)).status_code == 201

        head = commit_files(work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change infra")
        push(work, url, token=TOKEN)
        wait_until(lambda: http.get(f"{o}/stacks/net/runs").json()["runs"], 15, "the poll to start a run")
        # A few more polls, for a second (wrong) run to have its chance.
        wait_until(lambda: polls_of(o, tenant), 5, "the poll to be logged")
        seen = len(server.requests)
        wait_until(lambda: len(server.requests) >= seen + 4, 10, "more polls")

    runs = httpx.get(f"{o}/stacks/net/runs", headers=tenant.headers).json()["runs"]
    assert [(r["trigger"]["kind"], r["trigger"]["commit"]) for r in runs] == [("push", head)]
    assert [d["head"] for d in polls_of(o, tenant)] == [head]
    for replica in replicas:
        assert TOKEN not in replica.log()


def polls_of(o: str, tenant: Tenant) -> list[dict[str, object]]:
    deliveries = httpx.get(f"{o}/git/deliveries", headers=tenant.headers).json()["deliveries"]
    return [d for d in deliveries if d["source"] == "poll"]


GIT_DELIVERIES = """subscription($org: String!) {
  gitDeliveries(org: $org) { delivery httpStatus outcome }
}"""


async def test_the_delivery_log_is_live_over_a_graphql_subscription(
    server: LiveServer, tenant: Tenant
) -> None:
    import hashlib
    import hmac

    from support.graphql_ws import GraphQLWebSocket, ws_url

    o = f"{server.url}/api/v1/orgs/{tenant.org}"
    async with httpx.AsyncClient(headers=tenant.headers, timeout=30) as http:
        secret = (await http.post(f"{o}/git/webhook-secret")).json()["secret"]
        async with GraphQLWebSocket.connect(ws_url(server.url), tenant.token) as ws:
            live = await ws.subscribe(GIT_DELIVERIES, {"org": tenant.org})
            assert (await live.next())["gitDeliveries"] == []

            refused = await http.post(
                f"{o}/git/webhook",
                content=b"{}",
                headers={"X-GitHub-Event": "push", "X-GitHub-Delivery": "r-1"},
            )
            assert refused.status_code == 401
            first = (await live.next())["gitDeliveries"]
            assert [(d["delivery"], d["httpStatus"]) for d in first] == [("r-1", 401)]

            body = b'{"zen": "Design for failure."}'
            signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            ping = {"X-GitHub-Event": "ping", "X-GitHub-Delivery": "p-1", "X-Hub-Signature-256": signature}
            assert (await http.post(f"{o}/git/webhook", content=body, headers=ping)).status_code == 200
            second = (await live.next())["gitDeliveries"]
            assert [(d["delivery"], d["outcome"]) for d in second] == [
                ("p-1", "ignored: not a push event"),
                ("r-1", "refused: The request has no X-Hub-Signature-256 header."),
            ]
            assert secret not in "".join(ws.transcript)
    assert secret not in server.log()
