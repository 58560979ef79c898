"""Notifications in process: destinations (scope, write-only secret), deliveries written with the
status change and posted after commit to a real HTTP receiver, retried with the same delivery id
and recorded attempt by attempt; refusals of bad input name the field."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from starlette.applications import Starlette

from conftest import Tenant, settings_env
from firstlume.app import create_app
from firstlume.db.models_drift import NotificationAttempt, NotificationDelivery, NotificationDestination
from firstlume.db.types import utcnow
from firstlume.services import accounts
from firstlume.services.context import Context
from firstlume.services.notifications import destinations
from firstlume.services.notifications.addresses import PrivateAddress, check_webhook_url
from firstlume.services.notifications.sender import RETENTION, NotificationSender
from firstlume.settings import Settings
from support.runs import CREATE_ONE, plan_run, start
from support.waiting import until
from support.webhooks import Receiver, webhook_receiver

SECRET = "whsec-7c1f0a-notification-signing"


def notification_settings(database_url: str, tmp_path: Path, **extra: str) -> Settings:
    env = {
        "FIRSTLUME_SCHEDULER": "off",
        "FIRSTLUME_ALLOW_PRIVATE_WEBHOOKS": "true",
        "FIRSTLUME_NOTIFICATION_FIRST_RETRY": "0.05",
        **extra,
    }
    return Settings.from_env(settings_env(database_url, tmp_path / "data", **env))


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return notification_settings(database_url, tmp_path)


@pytest.fixture
def receiver() -> Any:
    with webhook_receiver() as found:
        yield found


class Rest:
    def __init__(self, http: httpx.AsyncClient, tenant: Tenant) -> None:
        self.http = http
        self.o = f"/api/v1/orgs/{tenant.org}"
        self.headers = tenant.headers

    async def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        content = json.dumps(body) if body is not None else None
        return await self.http.request(method, self.o + path, content=content, headers=self.headers)

    async def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        response = await self.call(method, path, body)
        assert response.status_code == status, response.text
        return response.json() if response.content else None

    async def stack(self, slug: str, folder: str | None = None) -> None:
        body = {"slug": slug, "repository": "file:///repo", **({"folder": folder} if folder else {})}
        await self.ok("POST", "/stacks", body, 201)

    async def canceled_run(self, stack: str) -> str:
        run = await self.ok("POST", f"/stacks/{stack}/runs", {"type": "plan"}, 201)
        await self.ok("POST", f"/runs/{run['id']}/cancel")
        return str(run["id"])


async def all_sent(ctx: Context) -> bool:
    async with ctx.db.read() as session:
        unsent = await session.scalar(
            select(func.count())
            .select_from(NotificationDelivery)
            .where(NotificationDelivery.delivered_at.is_(None), NotificationDelivery.given_up_at.is_(None))
        )
    return unsent == 0


@pytest.fixture
async def rest(client: httpx.AsyncClient, tenant: Tenant) -> Rest:
    return Rest(client, tenant)


async def test_a_failing_receiver_gets_the_same_delivery_until_it_answers_2xx(
    rest: Rest, receiver: Receiver, app: Starlette
) -> None:
    await rest.stack("network")
    receiver.answers = [500, 500]
    destination = await rest.ok(
        "POST",
        "/notifications",
        {"name": "ops", "url": receiver.url, "events": ["run.canceled"], "secret": SECRET},
        201,
    )
    run_id = await rest.canceled_run("network")
    await until(lambda: len(receiver.received) >= 3, 20, "three attempts")
    first, _, third = receiver.received
    delivery_id = first.headers["x-firstlume-delivery"]
    assert [r.headers["x-firstlume-delivery"] for r in receiver.received] == [delivery_id] * 3
    assert all(r.headers["x-firstlume-event"] == "run.canceled" for r in receiver.received)
    assert all(r.signed_with(SECRET) for r in receiver.received)
    assert third.json["delivery"] == delivery_id and third.json["run"]["id"] == run_id
    assert third.json["run"]["status"] == "canceled" and third.json["stack"] == "network"

    async def history() -> Any:
        return (await rest.ok("GET", f"/notifications/{destination['id']}/deliveries"))["deliveries"]

    async def delivered() -> Any:
        deliveries = await history()
        return deliveries[0]["status"] == "delivered" and deliveries

    [delivery] = await until(delivered, 5, "the delivery recorded as delivered")
    assert delivery["id"] == delivery_id and delivery["status"] == "delivered"
    assert [a["status_code"] for a in delivery["attempts"]] == [500, 500, 200]
    assert [a["number"] for a in delivery["attempts"]] == [1, 2, 3]
    assert delivery["attempts"][0]["error"] == "answered 500" and delivery["attempts"][2]["error"] is None
    assert all(isinstance(a["duration_ms"], int) for a in delivery["attempts"])
    # Delivered: the sender's next pass finds nothing due, so it is never sent again.
    assert await app.state.ctx.notifier.send_due() == 0
    assert len(receiver.received) == 3


async def test_destinations_hear_only_their_scope_and_their_events(
    rest: Rest, receiver: Receiver, ctx: Context
) -> None:
    await rest.stack("network", folder="prod/eu")
    await rest.stack("dns", folder="staging")
    await rest.stack("web")
    await rest.ok(
        "POST",
        "/notifications",
        {"name": "prod", "url": receiver.url + "/prod", "events": ["run.canceled"], "folder": "prod"},
        201,
    )
    await rest.ok(
        "POST",
        "/notifications",
        {"name": "web", "url": receiver.url + "/web", "events": ["run.canceled"], "stack": "web"},
        201,
    )
    await rest.ok(
        "POST",
        "/notifications",
        {
            "name": "all",
            "url": receiver.url + "/all",
            "events": ["run.canceled", "run.failed"],
            "format": "slack",
        },
        201,
    )
    await rest.ok(
        "POST",
        "/notifications",
        {"name": "other", "url": receiver.url + "/other", "events": ["run.applied"]},
        201,
    )
    for stack in ("network", "dns", "web"):
        await rest.canceled_run(stack)
    await until(lambda: len(receiver.received) >= 5, 20, "five deliveries")
    # Every delivery was written with its status change, in the same transaction: once none is
    # left to send, the receiver has heard all there is.
    await until(lambda: all_sent(ctx), 20, "every delivery to be sent")
    by_path: dict[str, list[str]] = {}
    for r in receiver.received:
        body = r.json
        by_path.setdefault(r.path, []).append(body.get("stack") or body["text"])
    assert sorted(by_path) == ["/hook/all", "/hook/prod", "/hook/web"]
    assert by_path["/hook/prod"] == ["network"]
    assert by_path["/hook/web"] == ["web"]
    # Slack's format: a message with the event, the stack and a link to the run.
    assert len(by_path["/hook/all"]) == 3
    assert all("*run.canceled*" in text and "/orgs/acme/runs/" in text for text in by_path["/hook/all"])
    assert all("x-firstlume-signature" not in r.headers for r in receiver.received)


async def test_the_secret_is_write_only_and_sealed(rest: Rest, receiver: Receiver, ctx: Context) -> None:
    created = await rest.ok(
        "POST",
        "/notifications",
        {"name": "ops", "url": receiver.url, "events": ["run.failed"], "secret": SECRET},
        201,
    )
    assert created["has_secret"] is True and SECRET not in json.dumps(created)
    listed = await rest.ok("GET", "/notifications")
    assert SECRET not in json.dumps(listed)
    async with ctx.db.read() as session:
        row = await session.scalar(select(NotificationDestination))
        assert row is not None and row.secret_sealed is not None
        assert SECRET.encode() not in row.secret_sealed
    changed = await rest.ok("PATCH", f"/notifications/{created['id']}", {"secret": None, "name": "ops-2"})
    assert changed["has_secret"] is False and changed["name"] == "ops-2"


async def test_a_test_message_is_sent_at_once_and_recorded(rest: Rest, receiver: Receiver) -> None:
    created = await rest.ok(
        "POST",
        "/notifications",
        {"name": "ops", "url": receiver.url, "events": ["run.failed"], "secret": SECRET},
        201,
    )
    delivery = await rest.ok("POST", f"/notifications/{created['id']}/test")
    assert delivery["status"] == "delivered" and delivery["test"] is True
    assert [a["status_code"] for a in delivery["attempts"]] == [200]
    [received] = receiver.received
    assert received.json["event"] == "test" and received.signed_with(SECRET)
    assert received.headers["x-firstlume-delivery"] == delivery["id"]
    receiver.answers = [503]
    failed = await rest.ok("POST", f"/notifications/{created['id']}/test")
    assert failed["status"] == "failed" and failed["attempts"][0]["error"] == "answered 503"
    history = await rest.ok("GET", f"/notifications/{created['id']}/deliveries")
    assert [d["status"] for d in history["deliveries"]] == ["failed", "delivered"]


async def test_redirects_are_never_followed(rest: Rest, receiver: Receiver) -> None:
    created = await rest.ok(
        "POST", "/notifications", {"name": "r", "url": receiver.url, "events": ["run.failed"]}, 201
    )
    receiver.answers = [302]
    delivery = await rest.ok("POST", f"/notifications/{created['id']}/test")
    assert delivery["status"] == "failed"
    assert "redirect" in delivery["attempts"][0]["error"]
    assert len(receiver.received) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"events": ["run.exploded"]}, "events"),
        ({"events": []}, "events"),
        ({"events": "run.failed"}, "events"),
        ({"url": "ftp://hooks.example.com/x"}, "url"),
        ({"url": "file:///etc/passwd"}, "url"),
        ({"url": "hooks.example.com"}, "url"),
        ({"name": "x" * (2 * 1024 * 1024)}, "name"),
        ({"name": ""}, "name"),
        ({"format": "xml"}, "format"),
        ({"folder": "prod", "stack": "web"}, None),
        ({"colour": "red"}, "colour"),
        ({"stack": "no-such-stack"}, None),
    ],
)
async def test_bad_destinations_are_refused_naming_the_field(
    rest: Rest, body: dict[str, Any], field: str | None, ctx: Context
) -> None:
    await rest.stack("web")
    complete = {"name": "ops", "url": "http://127.0.0.1:9/hook", "events": ["run.failed"], **body}
    response = await rest.call("POST", "/notifications", complete)
    if body == {"stack": "no-such-stack"}:
        assert response.status_code == 404, response.text
    else:
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_request"
        assert error.get("field") == field
        assert len(error["message"]) < 400
    async with ctx.db.read() as session:
        assert (await session.scalar(select(NotificationDestination))) is None


async def test_an_invalid_cron_schedule_is_refused(rest: Rest) -> None:
    for bad in ("61 * * * *", "* * * *", "every day", "* * * * * *"):
        response = await rest.call("PATCH", "/settings", {"drift_schedule": bad})
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == "drift_schedule"


@pytest.fixture
async def strict_client(database_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The app as shipped: private webhook addresses refused."""
    settings = notification_settings(database_url, tmp_path, FIRSTLUME_ALLOW_PRIVATE_WEBHOOKS="false")
    app: Starlette = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://testserver"
        ) as http:
            yield http


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://[::1]/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "http://0.0.0.0/hook",
    ],
)
async def test_private_addresses_are_refused_unless_allowed(
    strict_client: httpx.AsyncClient, tenant: Tenant, url: str, ctx: Context
) -> None:
    rest = Rest(strict_client, tenant)
    response = await rest.call("POST", "/notifications", {"name": "x", "url": url, "events": ["run.failed"]})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "url"
    assert "FIRSTLUME_ALLOW_PRIVATE_WEBHOOKS" in response.json()["error"]["message"]
    async with ctx.db.read() as session:
        assert (await session.scalar(select(NotificationDelivery))) is None
        assert (await session.scalar(select(NotificationDestination))) is None


async def test_old_finished_deliveries_are_deleted_with_their_attempts(
    rest: Rest, receiver: Receiver, ctx: Context
) -> None:

    created = await rest.ok(
        "POST", "/notifications", {"name": "ops", "url": receiver.url, "events": ["run.canceled"]}, 201
    )
    await rest.ok("POST", f"/notifications/{created['id']}/test")
    await rest.stack("web")
    receiver.release.clear()  # the run's delivery stays unanswered: not finished, never deleted
    await rest.canceled_run("web")
    sender = NotificationSender(ctx)
    try:
        later = utcnow() + RETENTION + timedelta(minutes=1)
        assert await sender.delete_old(later) == 1
    finally:
        receiver.release.set()
        await sender.stop()
    async with ctx.db.read() as session:
        remaining = list(await session.scalars(select(NotificationDelivery)))
        assert [d.test for d in remaining] == [False]
        # The test delivery's attempt went with it.
        attempts = list(await session.scalars(select(NotificationAttempt)))
        assert {a.delivery_id for a in attempts} <= {remaining[0].id}


async def test_each_attempt_checks_the_address_again(
    rest: Rest, receiver: Receiver, ctx: Context, database_url: str, tmp_path: Path
) -> None:
    """A destination saved while private addresses were allowed is refused at send time once they
    are not (or once its host resolves elsewhere): nothing reaches the receiver, the attempt says why."""

    await check_webhook_url("http://93.184.216.34/hook", allow_private=False)  # a public address
    with pytest.raises(PrivateAddress):
        await check_webhook_url("http://[fe80::1]/hook", allow_private=False)

    created = await rest.ok(
        "POST", "/notifications", {"name": "ops", "url": receiver.url, "events": ["run.canceled"]}, 201
    )
    strict = notification_settings(database_url, tmp_path, FIRSTLUME_ALLOW_PRIVATE_WEBHOOKS="false")
    async with ctx.unit() as unit:
        org = await accounts.org_for(
            unit.session, await accounts.authenticate(unit.session, rest.headers["Authorization"][7:]), "acme"
        )
        delivery_id = await destinations.add_test_delivery(unit.session, org, created["id"])
    sender = NotificationSender(replace(ctx, settings=strict, notifier=None))
    try:
        await sender.attempt_now(delivery_id)
    finally:
        await sender.stop()
    history = await rest.ok("GET", f"/notifications/{created['id']}/deliveries")
    [attempted] = history["deliveries"]
    assert attempted["status"] == "failed" and attempted["attempts"][0]["status_code"] is None
    assert attempted["attempts"][0]["error"].startswith("refused: the host 127.0.0.1 is a loopback")
    assert receiver.received == []


async def test_a_null_url_in_an_update_is_refused_naming_the_field(rest: Rest, receiver: Receiver) -> None:
    created = await rest.ok(
        "POST", "/notifications", {"name": "ops", "url": receiver.url, "events": ["run.failed"]}, 201
    )
    response = await rest.call("PATCH", f"/notifications/{created['id']}", {"url": None})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["field"], error["message"]) == (
        "url",
        "'url' cannot be null; leave it out to keep the current value.",
    )


async def test_a_discarded_run_says_who_discarded_it(
    rest: Rest, receiver: Receiver, ctx: Context, tenant: Tenant
) -> None:
    await rest.stack("network")
    for format in ("slack", "json"):
        body = {
            "name": format,
            "url": f"{receiver.url}/{format}",
            "events": ["run.discarded"],
            "format": format,
        }
        await rest.ok("POST", "/notifications", body, 201)
    run_id = await start(ctx, tenant.token, "acme", "network", "apply")
    assert await plan_run(ctx, CREATE_ONE) == {run_id: "awaiting_approval"}
    await rest.ok("POST", f"/runs/{run_id}/discard")
    await until(lambda: len(receiver.received) >= 2, 20, "the two deliveries")
    by_path = {r.path: r.json for r in receiver.received}
    assert by_path["/hook/json"]["run"]["ended_by"] == "ada@example.com"
    assert by_path["/hook/slack"]["text"].startswith(
        "*run.discarded*: run #1 (apply) of *network* is discarded by ada@example.com: 1 create"
    )
