"""create_app(settings): the control plane. Mounts REST, GraphQL and the SPA; the lifespan owns
the database engine, the pub/sub connection, the outbox relay and the scheduler."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route

from firstlume.api import health, metrics_route
from firstlume.api.body_limits import BodyLimits
from firstlume.api.graphql.app import graphql_routes
from firstlume.api.middleware import RequestMiddleware
from firstlume.api.rest import (
    access_routes,
    audit_routes,
    cli_login_routes,
    dependency_routes,
    drift_routes,
    executor_routes,
    folder_grant_routes,
    git_routes,
    notification_routes,
    org_routes,
    policy_routes,
    pull_request_routes,
    removal_routes,
    run_routes,
    sso_routes,
    state_routes,
)
from firstlume.api.rest.guard import guard
from firstlume.api.rest.http import not_found_route
from firstlume.api.session_cookie import SessionCookies
from firstlume.api.spa import spa_routes
from firstlume.api.tfe import routes as tfe_routes
from firstlume.db.engine import Database
from firstlume.keys import load_keyring
from firstlume.launchers.base import Launcher
from firstlume.pubsub import PubSub
from firstlume.scheduler.git_poll import GitPoller
from firstlume.scheduler.loop import Scheduler
from firstlume.services.context import Context
from firstlume.services.dependencies.triggers import DependencyTriggers
from firstlume.services.drift.loop import DriftScheduler
from firstlume.services.git.feedback import GitFeedbackSender
from firstlume.services.git.remote import GitCache
from firstlume.services.notifications.sender import NotificationSender
from firstlume.services.outbox import OutboxRelay
from firstlume.settings import Settings

log = logging.getLogger("firstlume")

STATIC_DIR = Path(__file__).parent / "static"
API_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "LOCK", "UNLOCK")


def protect_data_dir(settings: Settings) -> None:
    """The data dir (database, generated key, executor logs) and an SQLite database file are
    this user's alone: another user, an executor run as one included, cannot read them."""
    paths = [settings.data_dir]
    if settings.is_sqlite:
        database = Path(settings.database_url.split(":///", 1)[1])
        paths += [database.with_name(database.name + s) for s in ("", "-wal", "-shm")]
    for path in paths:
        try:
            if path.exists() and path.stat().st_uid == os.getuid():
                path.chmod(0o700 if path.is_dir() else 0o600)
        except OSError:
            log.warning("could not make %s private to this user", path)


def build_launcher(settings: Settings) -> Launcher:
    if settings.launcher == "kubernetes":
        from firstlume.launchers.kubernetes import KubernetesLauncher

        return KubernetesLauncher.from_settings(settings)
    if settings.launcher == "simulated":
        from firstlume.launchers.simulated import SimulatedLauncher, SimulatedWorkload

        return SimulatedLauncher(
            SimulatedWorkload(
                resources=settings.simulated_resources,
                log_lines=settings.simulated_log_lines,
                lines_per_second=settings.simulated_lines_per_second,
                record_dir=settings.simulated_record_dir,
                log_dir=settings.data_dir / "executors",
            )
        )
    from firstlume.demo import DEMO_REPOSITORY
    from firstlume.launchers.local import Isolation, LocalLauncher
    from firstlume.local_tls import PUBLIC

    hidden_files: tuple[Path, ...] = ()
    if settings.is_sqlite:
        database = Path(settings.database_url.split(":///", 1)[1]).resolve()
        hidden_files = tuple(database.with_name(database.name + s) for s in ("", "-wal", "-shm", "-journal"))
    isolation = Isolation(
        work_root=settings.executor_work_dir,
        hidden_dirs=(settings.data_dir,),
        hidden_files=hidden_files,
        # The demo repository, and the certificates of `make run TLS=1` (never its key).
        shown_dirs=(settings.data_dir / DEMO_REPOSITORY, settings.data_dir / "tls" / PUBLIC),
        sandbox=settings.executor_sandbox,
        passed_env=settings.executor_env,
    )
    return LocalLauncher(
        settings.data_dir / "executors", isolation=isolation, spares=settings.executor_spares
    )


def _request_pool(settings: Settings) -> dict[str, float]:
    """The size of the requests' and the scheduler's PostgreSQL pool (SQLite keeps its default:
    one writer at a time, whatever the pool)."""
    if settings.database_url.startswith("sqlite"):
        return {}
    return {
        "pool_size": settings.database_pool_size,
        "max_overflow": settings.database_max_overflow,
        "pool_timeout": settings.database_pool_timeout,
    }


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        db = Database(settings.database_url, **_request_pool(settings))
        protect_data_dir(settings)
        pubsub = PubSub(settings.pubsub_url)
        await pubsub.connect()
        # The relay has a connection of its own: a burst of requests never holds up events, and
        # the relay never takes a request's connection.
        relay_db = Database(settings.database_url, pool_size=1, max_overflow=1)
        relay = OutboxRelay(relay_db, pubsub)
        ctx = Context(settings=settings, db=db, keyring=load_keyring(settings), pubsub=pubsub, relay=relay)
        await relay.start()
        # Every replica sends notifications: each delivery is claimed by one sender at a time.
        # The services are given it, and then the scheduler, as the ports of the context they
        # use; each background service runs on the context built before it (it needs no port
        # to itself).
        notifier_db = Database(settings.database_url, pool_size=2, max_overflow=2)
        notifier = NotificationSender(ctx, db=notifier_db)
        ctx = replace(ctx, notifier=notifier)
        await notifier.start()
        # Every replica posts Git host feedback (statuses, PR comments), on the notifier's pool.
        git_feedback = GitFeedbackSender(ctx, db=notifier_db)
        ctx = replace(ctx, git_feedback=git_feedback)
        await git_feedback.start()
        scheduler = None
        if settings.scheduler_enabled:
            scheduler = Scheduler(
                ctx, build_launcher(settings), serving_since=lambda: getattr(app.state, "serving_since", None)
            )
            ctx = replace(ctx, scheduler=scheduler)
            await scheduler.start()
        dependency_triggers = None
        if settings.scheduler_enabled:
            # Every replica with a scheduler starts dependents' runs: each trigger row is
            # carried out by one of them, once (services/dependencies/triggers.py).
            dependency_triggers = DependencyTriggers(ctx)
            ctx = replace(ctx, dependency_triggers=dependency_triggers)
            await dependency_triggers.start()
        app.state.ctx = ctx
        # The token watch of the context the API uses (each context made above has its own).
        await ctx.token_watch.start()
        drift = None
        poller = None
        if settings.scheduler_enabled:
            # Every replica with a scheduler runs it: the database makes each slot's run one.
            drift = DriftScheduler(ctx)
            await drift.start()
            if settings.git_poll_interval > 0:
                poller = GitPoller(ctx, GitCache(settings.data_dir / "git-cache"), settings.git_poll_interval)
                await poller.start()
        # Their state answers /readyz (api/health.py).
        services = (
            relay,
            notifier,
            git_feedback,
            ctx.token_watch,
            scheduler,
            dependency_triggers,
            drift,
            poller,
        )
        app.state.services = [service for service in services if service is not None]
        try:
            yield
        finally:
            if poller is not None:
                await poller.stop()
            if drift is not None:
                await drift.stop()
            if dependency_triggers is not None:
                await dependency_triggers.stop()
            if scheduler is not None:
                await scheduler.stop()
            await git_feedback.stop()
            await notifier.stop()
            await ctx.token_watch.stop()
            await notifier_db.dispose()
            await relay.stop()
            await pubsub.disconnect()
            await relay_db.dispose()
            await db.dispose()

    routes: list[BaseRoute] = [
        *health.routes,
        *metrics_route.routes,
        *org_routes.routes,
        *folder_grant_routes.routes,
        *removal_routes.routes,
        *run_routes.routes,
        *executor_routes.routes,
        *state_routes.routes,
        *git_routes.routes,
        *pull_request_routes.routes,
        *drift_routes.routes,
        *notification_routes.routes,
        *policy_routes.routes,
        *access_routes.routes,
        *audit_routes.routes,
        *dependency_routes.routes,
        *sso_routes.routes,
        *cli_login_routes.routes,
        # The HCP Terraform API the Terraform CLI speaks (a `cloud` block).
        *tfe_routes.routes,
        # Every method the API knows (LOCK and UNLOCK: Terraform's): a path served for other
        # methods gets its 405 here, in the API's JSON shape, not Starlette's plain text.
        Route("/api/{rest:path}", not_found_route, methods=list(API_METHODS)),
    ]
    routes += _graphql_and_spa_routes()
    # Every route checks the role the permission table names; an unlisted route stops the start.
    routes = guard(routes)
    # Authenticated first, body capped: a body is never read for a caller without a token.
    # Outermost: the request id (logs, X-Request-ID, the audit trail) and the request's metrics.
    middleware = [
        Middleware(RequestMiddleware),
        # The browser's session cookie becomes the request's credentials (CSRF-checked on writes).
        Middleware(SessionCookies),
        Middleware(
            BodyLimits,
            max_json_bytes=settings.max_json_body_bytes,
            max_upload_bytes=settings.max_upload_bytes,
        ),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware)
    app.state.settings = settings
    return app


def _graphql_and_spa_routes() -> list[BaseRoute]:
    return [*graphql_routes(), *spa_routes(STATIC_DIR)]
