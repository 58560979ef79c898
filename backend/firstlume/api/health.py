"""Probes: /healthz says the process is up; /readyz that the database answers, is migrated and
can store something (a probe row written in place; and no storage failure met by this process in
the last few seconds: a disk with room for the probe may have none for a run's log), and how this
process's background services (background.py) fare: up, seconds since their last good pass,
failed passes in a row. Those are reported, not judged: a service whose passes fail keeps
trying, and readiness stays the database's."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.background import BackgroundService
from firstlume.domain.errors import StorageUnavailable
from firstlume.services.context import Context
from firstlume.services.readiness import code_revision, database_revision, probe_storage
from firstlume.services.storage import retry_after_headers, storage_failure

log = logging.getLogger("firstlume.api")


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    ctx = request.app.state.ctx
    started: list[BackgroundService] = getattr(request.app.state, "services", [])
    services = {service.name: service.health() for service in started}
    try:
        revision = await database_revision(ctx.db)
    except Exception as error:
        storage = storage_failure(error)
        if storage is not None and storage.kind != "gone":
            ctx.storage.failed(storage)
            return _storage_unavailable_response(storage, None, services)
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
    storage = await _storage_unavailable(ctx)
    if storage is not None:
        return _storage_unavailable_response(storage, revision, services)
    return JSONResponse({"status": "ok", "migration": revision, "services": services})


def _storage_unavailable_response(
    storage: StorageUnavailable, revision: str | None, services: dict[str, dict[str, object]]
) -> Response:
    return JSONResponse(
        {
            "status": "unavailable",
            "reason": storage.message,
            "code": storage.code,
            "migration": revision,
            "services": services,
        },
        status_code=503,
        headers=retry_after_headers(storage),
    )


async def _storage_unavailable(ctx: Context) -> StorageUnavailable | None:
    try:
        await probe_storage(ctx.db)
    except Exception as error:
        storage = storage_failure(error)
        if storage is None:
            log.exception("the readiness probe's write failed")
            return StorageUnavailable(
                "The database did not store the readiness probe's row; the server's log says why.",
                kind="gone",
            )
        ctx.storage.failed(storage)
        return storage
    return ctx.storage.recent()


routes = [Route("/healthz", healthz), Route("/readyz", readyz)]
