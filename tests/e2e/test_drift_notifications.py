"""Drift and notifications end to end: a served control plane (scheduler, local executors), real
Terraform, a real HTTP receiver. A real run notifies awaiting_approval then applied, signed; a
real out-of-band change turns the stack drifted with the right addresses; a control plane killed
between the commit and the send loses no notification."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from support.e2e import Api, StackRepo, backend_tf, make_stack_repo
from support.terraform import requires_terraform, run_terraform, terraform_env, write_config
from support.waiting import wait_until
from support.webhooks import Receiver, webhook_receiver

pytestmark = requires_terraform

SECRET = "whsec-e2e-5b9d-signing-secret"
MAIN = """
resource "terraform_data" "first" { input = "one" }
resource "terraform_data" "second" { input = "two" }
"""


def served(database_url: str, tmp_path: Path, name: str = "server", **extra: str) -> LiveServer:
    env = settings_env(
        database_url,
        tmp_path / "data",
        FIRSTLUME_ALLOW_PRIVATE_WEBHOOKS="true",
        FIRSTLUME_NOTIFICATION_FIRST_RETRY="0.2",
        FIRSTLUME_NOTIFICATION_LEASE="2",
        **extra,
    )
    return start_live_server(env, tmp_path / f"{name}.log")


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    live = served(database_url, tmp_path)
    yield live
    stop_live_server(live)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as found:
        yield found


@pytest.fixture
def repo(tmp_path: Path) -> StackRepo:
    return make_stack_repo(tmp_path, MAIN)


def add_destination(api: Api, url: str, events: list[str], **extra: Any) -> dict[str, Any]:
    response = api.post("/notifications", {"name": "ops", "url": url, "events": events, **extra})
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def test_a_real_run_notifies_awaiting_approval_then_applied_signed(
    api: Api, repo: StackRepo, receiver: Receiver
) -> None:
    destination = add_destination(api, receiver.url, ["run.awaiting_approval", "run.applied"], secret=SECRET)
    api.create_stack("app", repo)
    run_id = api.start("app", "apply")
    api.wait(run_id, "awaiting_approval")
    wait_until(lambda: len(receiver.received) >= 1, 20, "run.awaiting_approval")
    api.approve(run_id)
    api.wait(run_id, "applied")
    wait_until(lambda: len(receiver.received) >= 2, 20, "run.applied")

    # The deliveries are written with the status changes: once every one is delivered, the
    # receiver has heard all there is.
    def all_delivered() -> bool:
        deliveries = api.http.get(f"{api.o}/notifications/{destination['id']}/deliveries").json()
        return all(d["status"] == "delivered" for d in deliveries["deliveries"])

    wait_until(all_delivered, 20, "every delivery to be delivered")
    assert receiver.events() == ["run.awaiting_approval", "run.applied"]
    waiting, applied = receiver.received
    for received, status in ((waiting, "awaiting_approval"), (applied, "applied")):
        assert received.signed_with(SECRET), received.headers
        body = received.json
        assert received.headers["x-firstlume-event"] == body["event"] == f"run.{status}"
        assert received.headers["x-firstlume-delivery"] == body["delivery"]
        assert body["organization"] == "acme" and body["stack"] == "app"
        assert body["run"]["id"] == run_id and body["run"]["status"] == status
        assert body["run"]["type"] == "apply" and body["run"]["summary_text"] == "2 create"
        assert body["run"]["url"].endswith(f"/orgs/acme/runs/{run_id}") and body["sent_at"].endswith("Z")
    assert waiting.json["delivery"] != applied.json["delivery"]
    # A body signed with another secret, or altered, does not verify.
    assert not waiting.signed_with("another secret")


def out_of_band_state_rm(tmp_path: Path, repo: StackRepo, address: str) -> None:
    """Someone removes a resource from the real state behind Firstlume's back, with Terraform."""
    workdir = tmp_path / "out-of-band"
    workdir.mkdir()
    write_config(workdir, backend_tf(repo.state_path), name="backend.tf")
    env = terraform_env(tmp_path)
    run_terraform(["init"], workdir, env)
    run_terraform(["state", "rm", address], workdir, env)


def drift_of(api: Api) -> dict[str, dict[str, Any]]:
    response = api.http.get(f"{api.o}/drift")
    assert response.status_code == 200, response.text
    return {line["stack"]: line for line in response.json()["stacks"]}


def test_an_out_of_band_change_turns_the_stack_drifted_with_its_addresses(
    api: Api, repo: StackRepo, tmp_path: Path
) -> None:
    api.create_stack("app", repo)
    api.create_stack("idle", repo)
    assert drift_of(api)["app"]["status"] == "unknown"
    run_id = api.start("app", "apply")
    api.wait(run_id, "awaiting_approval")
    api.approve(run_id)
    api.wait(run_id, "applied")

    first = api.wait(api.start("app", "drift"), "no_changes")
    line = drift_of(api)["app"]
    assert line["status"] == "in_sync" and line["drifted"] == []
    assert line["since"] == first["finished_at"] and line["last_run"]["id"] == first["id"]

    out_of_band_state_rm(tmp_path, repo, "terraform_data.second")
    drifted = api.wait(api.start("app", "drift"), "drifted")
    line = drift_of(api)["app"]
    assert line["status"] == "drifted"
    assert line["drifted"] == ["terraform_data.second"]
    assert line["resources"] == [{"address": "terraform_data.second", "action": "create"}]
    assert line["since"] == drifted["finished_at"] and line["last_run"]["id"] == drifted["id"]
    assert drift_of(api)["idle"]["status"] == "unknown"

    # Still drifted at the next check: "since" stays at the first drifted run.
    again = api.wait(api.start("app", "drift"), "drifted")
    assert drift_of(api)["app"]["since"] == drifted["finished_at"]

    history = api.http.get(f"{api.o}/stacks/app/drift").json()["runs"]
    assert [(r["id"], r["drift"], r["drifted"]) for r in history] == [
        (again["id"], "drifted", ["terraform_data.second"]),
        (drifted["id"], "drifted", ["terraform_data.second"]),
        (first["id"], "in_sync", []),
    ]


def test_a_control_plane_killed_between_commit_and_send_loses_nothing(
    database_url: str, tmp_path: Path, tenant: Tenant, receiver: Receiver
) -> None:
    first = served(database_url, tmp_path, "first", FIRSTLUME_SCHEDULER="off")
    api = Api(first.url, tenant.org, tenant.token)
    try:
        destination = add_destination(api, receiver.url, ["run.canceled"], secret=SECRET)
        response = api.http.post(
            f"{api.o}/stacks", content=json.dumps({"slug": "app", "repository": "file:///nowhere"})
        )
        assert response.status_code == 201, response.text
        # The receiver holds the request: the control plane has committed and is sending.
        receiver.release.clear()
        run_id = api.start("app", "plan")
        assert api.post(f"/runs/{run_id}/cancel").status_code == 200
        assert receiver.arrived.wait(20), "the first attempt never arrived"
        first.process.kill()  # SIGKILL: no shutdown, the attempt is never recorded
        first.process.wait()
    finally:
        api.close()
    [held] = receiver.received
    delivery_id = held.headers["x-firstlume-delivery"]
    receiver.release.set()

    second = served(database_url, tmp_path, "second", FIRSTLUME_SCHEDULER="off")
    api = Api(second.url, tenant.org, tenant.token)
    try:
        wait_until(lambda: len(receiver.received) >= 2, 30, "the delivery sent again after the restart")
        again = receiver.received[1]
        assert again.headers["x-firstlume-delivery"] == delivery_id
        assert again.json["run"]["id"] == run_id and again.signed_with(SECRET)

        def delivered() -> Any:
            response = api.http.get(f"{api.o}/notifications/{destination['id']}/deliveries")
            deliveries = response.json()["deliveries"]
            return deliveries if deliveries and deliveries[0]["status"] == "delivered" else None

        [delivery] = wait_until(delivered, 10, "the delivery recorded as delivered")
        assert delivery["id"] == delivery_id
        assert [a["status_code"] for a in delivery["attempts"]] == [200]
    finally:
        api.close()
        stop_live_server(second)


def test_the_served_app_refuses_unknown_query_and_routes(api: Api) -> None:
    assert api.http.get(f"{api.o}/drift", params={"x": "1"}).status_code == 422
    assert api.http.get(f"{api.o}/stacks/nope/drift").status_code == 404
    assert api.http.get(f"{api.o}/notifications/nope/deliveries").status_code == 404
