"""Metrics and request ids of a served control plane after real runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from conftest import LiveServer, Tenant
from support.e2e import Api, StackRepo, make_stack_repo
from support.graphql_ws import GraphQLWebSocket, ws_url
from support.terraform import requires_terraform

MAIN = 'resource "terraform_data" "one" { input = "x" }\n'


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(url + "/metrics", timeout=10)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


@requires_terraform
async def test_metrics_after_real_runs(server: LiveServer, api: Api, tenant: Tenant, tmp_path: Path) -> None:
    repo: StackRepo = make_stack_repo(tmp_path, MAIN)
    api.create_stack("app", repo)
    planned = api.start("app", "plan")
    api.wait(planned, "planned")
    applied = api.start("app", "apply")
    api.wait(applied, "awaiting_approval")
    api.approve(applied)
    api.wait(applied, "applied")
    # One more waits in the queue: its stack is locked by a run awaiting approval.
    (tmp_path / "other").mkdir()
    api.create_stack("other", make_stack_repo(tmp_path / "other", MAIN))
    locker = api.start("other", "apply")
    api.wait(locker, "awaiting_approval")
    waiting = api.start("other", "plan")
    async with httpx.AsyncClient() as http:
        graphql = await http.post(
            server.url + "/graphql",
            json={"query": "{ viewer { email } }"},
            headers={"Authorization": f"Bearer {tenant.token}"},
        )
    assert graphql.status_code == 200

    async with GraphQLWebSocket.connect(ws_url(server.url), tenant.token) as ws:
        sub = await ws.subscribe(
            "subscription($org: String!, $id: ID!) { runUpdated(org: $org, runId: $id) { id status } }",
            {"org": tenant.org, "id": waiting},
        )
        assert (await sub.next())["runUpdated"]["status"] == "QUEUED"
        during = await asyncio.to_thread(scrape, server.url)
    assert value(during, "firstlume_active_subscriptions", field="runUpdated") == 1

    samples = scrape(server.url)
    assert value(samples, "firstlume_runs", status="planned") == 1
    assert value(samples, "firstlume_runs", status="applied") == 1
    assert value(samples, "firstlume_runs", status="awaiting_approval") == 1
    assert value(samples, "firstlume_runs", status="queued") == 1
    assert value(samples, "firstlume_queue_depth") == 1
    # Plan phases: three runs planned; one apply phase.
    assert value(samples, "firstlume_phase_duration_seconds_count", phase="plan", result="succeeded") == 3
    assert value(samples, "firstlume_phase_duration_seconds_count", phase="apply", result="succeeded") == 1
    assert value(samples, "firstlume_scheduler_claimed_phases_total", phase="plan") == 3
    assert value(samples, "firstlume_scheduler_claimed_phases_total", phase="apply") == 1
    assert value(samples, "firstlume_scheduler_claim_latency_seconds_count") >= 4
    assert value(samples, "firstlume_missed_heartbeats_total") == 0
    starts = value(
        samples,
        "firstlume_http_request_duration_seconds_count",
        method="POST",
        route="/api/v1/orgs/{org}/stacks/{stack}/runs",
        status="201",
    )
    assert starts == 4
    assert (
        value(
            samples,
            "firstlume_http_request_duration_seconds_count",
            route="/api/v1/orgs/{org}/stacks",
            method="POST",
        )
        == 2
    )
    assert value(samples, "firstlume_graphql_request_duration_seconds_count", operation="query") >= 1
    assert value(samples, "firstlume_active_subscriptions", field="runUpdated") == 0
    assert ("firstlume_notification_deliveries_total", ()) not in samples  # defined, labelled, none yet
    # Every background service of a served control plane has passed, and none failed.
    services = (
        "scheduler",
        "outbox-relay",
        "notification-sender",
        "git-feedback-sender",
        "drift-scheduler",
        "git-poll",
        "token-watch",
    )
    for service in services:
        assert value(samples, "firstlume_background_last_pass_timestamp_seconds", service=service) > 0
    assert value(samples, "firstlume_background_failed_passes_total") == 0
    # No series per run: route labels are templates.
    assert not [key for key in samples if any(planned in v for _, v in key[1])]


def test_responses_carry_a_request_id(server: LiveServer) -> None:
    response = httpx.get(server.url + "/healthz", headers={"X-Request-ID": "probe-42"})
    assert response.headers["x-request-id"] == "probe-42"
    fresh = httpx.get(server.url + "/healthz").headers["x-request-id"]
    assert len(fresh) == 32
    refused = httpx.get(server.url + "/healthz", headers={"X-Request-ID": "bad id with spaces"})
    assert refused.headers["x-request-id"] != "bad id with spaces"
