"""create_app(settings): the control plane. Mounts REST, GraphQL and the SPA; the lifespan owns
the database engine, the pub/sub connection, the outbox relay and the scheduler."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route

from firstlume.api import health, metrics_route
from firstlume.api.graphql.app import graphql_routes
from firstlume.api.graphql.query_thread import QueryThread
from firstlume.api.middleware import RequestMiddleware
from firstlume.api.rest import executor_routes, org_routes, run_routes, state_routes
from firstlume.api.rest.http import not_found_route
from firstlume.api.spa import spa_routes
from firstlume.db.engine import Database
from firstlume.keys import load_keyring
from firstlume.launchers.base import Launcher
from firstlume.pubsub import PubSub
from firstlume.scheduler.loop import Scheduler
from firstlume.services.context import Context
from firstlume.services.outbox import OutboxRelay
from firstlume.settings import Settings

log = logging.getLogger("firstlume")

STATIC_DIR = Path(__file__).parent / "static"


def build_launcher(settings: Settings) -> Launcher:
    if settings.launcher == "kubernetes":
        from firstlume.launchers.kubernetes import KubernetesLauncher

        return KubernetesLauncher.from_settings(settings)
    from firstlume.launchers.local import LocalLauncher

    return LocalLauncher(settings.data_dir / "executors")


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        db = Database(settings.database_url)
        pubsub = PubSub(settings.pubsub_url)
        await pubsub.connect()
        # The relay has a connection of its own: a burst of requests never holds up events, and
        # the relay never takes a request's connection.
        relay_db = Database(settings.database_url, pool_size=1, max_overflow=1)
        relay = OutboxRelay(relay_db, pubsub)
        ctx = Context(settings=settings, db=db, keyring=load_keyring(settings), pubsub=pubsub, relay=relay)
        app.state.ctx = ctx
        await relay.start()
        query_thread = QueryThread(ctx)
        query_thread.start()
        app.state.query_thread = query_thread
        scheduler = None
        if settings.scheduler_enabled:
            scheduler = Scheduler(
                ctx, build_launcher(settings), serving_since=lambda: getattr(app.state, "serving_since", None)
            )
            await scheduler.start()
        try:
            yield
        finally:
            if scheduler is not None:
                await scheduler.stop()
            await relay.stop()
            await query_thread.stop()
            await pubsub.disconnect()
            await relay_db.dispose()
            await db.dispose()

    routes: list[BaseRoute] = [
        *health.routes,
        *metrics_route.routes,
        *org_routes.routes,
        *run_routes.routes,
        *executor_routes.routes,
        *state_routes.routes,
        Route("/api/{rest:path}", not_found_route, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
    ]
    routes += _graphql_and_spa_routes()
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(RequestMiddleware)])
    app.state.settings = settings
    return app


def _graphql_and_spa_routes() -> list[BaseRoute]:
    return [*graphql_routes(), *spa_routes(STATIC_DIR)]
