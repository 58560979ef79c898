"""Probes: /healthz says the process is up; /readyz that the database answers and is migrated,
and how this process's background services (background.py) fare: up, seconds since their
last good pass, failed passes in a row. Those are reported, not judged: a service whose passes
fail keeps trying, and readiness stays the database's."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.background import BackgroundService
from firstlume.services.readiness import code_revision, database_revision


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    ctx = request.app.state.ctx
    started: list[BackgroundService] = getattr(request.app.state, "services", [])
    services = {service.name: service.health() for service in started}
    try:
        revision = await database_revision(ctx.db)
    except Exception:
        return JSONResponse(
            {"status": "unavailable", "reason": "The database does not answer.", "services": services},
            status_code=503,
        )
    head = code_revision()
    if revision != head:
        return JSONResponse(
            {
                "status": "unavailable",
                "reason": f"The database is at migration {revision}, not {head}: run `firstlume migrate`.",
                "services": services,
            },
            status_code=503,
        )
    return JSONResponse({"status": "ok", "migration": revision, "services": services})


routes = [Route("/healthz", healthz), Route("/readyz", readyz)]
