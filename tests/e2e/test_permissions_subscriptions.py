"""Every GraphQL subscription of a served control plane allows and refuses as the permission table says."""

from __future__ import annotations

from conftest import LiveServer, Tenant
from firstlume.domain.errors import InvalidStatus
from firstlume.domain.runs import FINISHED
from firstlume.services import accounts, runs
from firstlume.services.access.permissions import GRAPHQL
from firstlume.services.commands import CancelRun
from firstlume.services.context import Context
from firstlume.services.reads import runs as run_reads
from support.graphql_ws import GraphQLWebSocket, SubscriptionError, ws_url
from support.waiting import until
from test_permissions import ORG, SUBSCRIPTIONS, callers, expected_for, world


async def test_every_subscription_allows_and_refuses_as_the_table_says(
    server: LiveServer, ctx: Context, tenant: Tenant
) -> None:
    values = await world(ctx, tenant)
    # A finished run: each allowed stream answers at once. The served scheduler may have started
    # its plan already (then it cannot be canceled, and ends by itself: its repository is none).
    try:
        async with ctx.unit() as unit:
            actor = await accounts.authenticate(unit.session, tenant.token)
            org = await accounts.org_for(unit.session, actor, ORG)
            run = await run_reads.run_in_org(unit.session, org.id, values["run"])
            if run is not None and run.status == "queued":
                await runs.cancel_run(unit, actor, org, run.id, CancelRun())
    except InvalidStatus:
        pass

    async def finished() -> bool:
        async with ctx.db.read() as session:
            run = await run_reads.run_in_org(session, org.id, values["run"])
        return run is None or run.status in FINISHED

    await until(finished, 60, "the world's run to finish")
    people = await callers(ctx, tenant)
    wrong = []
    for field, call in SUBSCRIPTIONS.items():
        need = GRAPHQL[f"Subscription.{field}"]
        for caller in people:
            token = caller.headers["Authorization"].removeprefix("Bearer ")
            async with GraphQLWebSocket.connect(ws_url(server.url), token) as ws:
                stream = await ws.subscribe("subscription { " + call.replace("$run", values["run"]) + " }")
                try:
                    payload = await stream.next_payload(within=10)
                    errors = payload.get("errors") or []
                    got = errors[0]["extensions"].get("code") if errors else "allowed"
                except SubscriptionError as refused:
                    got = f"error {refused.payload}"
                except Exception as ended:  # completed without data: it was allowed
                    got = "allowed" if type(ended).__name__ == "Completed" else repr(ended)
            want = expected_for(need, caller)
            if got != want:
                wrong.append(f"Subscription.{field} by {caller.name}: {got}, expected {want}")
    assert wrong == [], "\n".join(wrong)
