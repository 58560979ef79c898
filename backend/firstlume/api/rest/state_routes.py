"""Managed state over Terraform's `http` backend protocol (platform-api.md §2), for a stack's root
module and for each Terragrunt unit: GET / POST / DELETE the state, LOCK / UNLOCK its lock,
force-unlock, versions and outputs.

Terraform reads only the status of most answers. Where it reads a body (a held lock's 423, an
UNLOCK's 409) the body is Terraform's own lock info, with the error shape beside it under
"error", so that both Terraform and a person reading JSON find what they expect.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.authorization import token_from
from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.guard import need_of, remember_actor
from firstlume.api.rest.http import check_query, context_of, endpoint, int_param
from firstlume.api.rest.serializers import iso
from firstlume.domain.errors import InvalidRequest, NotFound
from firstlume.domain.state import normalize_unit, parse_lock_info
from firstlume.services.context import Unit
from firstlume.services.reads import Session
from firstlume.services.reads import state as state_reads
from firstlume.services.reads.state import VersionRecord
from firstlume.services.state import locks, store
from firstlume.services.state.callers import StateCaller, state_caller
from firstlume.services.state.locks import LockHeldByOther, StateLocked
from firstlume.services.state.outputs import current_outputs

# Terraform sends the whole state in one request; a bigger one is refused before it is read.
MAX_STATE_BYTES = 256 * 1024 * 1024
MAX_LOCK_BYTES = 64 * 1024
DEFAULT_VERSIONS = 100


def state_token(request: Request) -> str | None:
    """`Authorization: Bearer <token>`, or HTTP Basic with the token as the password (what
    Terraform's http backend sends; the username is ignored)."""
    return token_from(request.headers.get("authorization"), basic=True)


def _unit(request: Request) -> str:
    return normalize_unit(request.path_params.get("unit", "."))


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise InvalidRequest(f"The body is larger than {limit} bytes.")
    raw = await request.body()
    if len(raw) > limit:
        raise InvalidRequest(f"The body is larger than {limit} bytes.")
    return raw


@asynccontextmanager
async def state_change(request: Request) -> AsyncIterator[tuple[Unit, StateCaller, str]]:
    unit_path = _unit(request)
    async with context_of(request).unit() as unit:
        params = request.path_params
        caller = await state_caller(
            unit.session, state_token(request), params["org"], params["stack"], need_of(request)
        )
        remember_actor(request, caller.actor)
        yield unit, caller, unit_path


@asynccontextmanager
async def state_read(request: Request, *query: str) -> AsyncIterator[tuple[Session, StateCaller, str]]:
    check_query(request, query)
    unit_path = _unit(request)
    async with context_of(request).db.read() as session:
        params = request.path_params
        caller = await state_caller(
            session, state_token(request), params["org"], params["stack"], need_of(request)
        )
        remember_actor(request, caller.actor)
        yield session, caller, unit_path


def _state_response(raw: bytes) -> Response:
    # The exact bytes Terraform sent: it checks them against its own MD5.
    return Response(raw, media_type="application/json")


def _lock_refusal(http_status: int, error: StateLocked | LockHeldByOther) -> JSONResponse:
    body: dict[str, Any] = dict(error.lock_info)
    lock = error.details.get("lock") or {}
    if lock.get("holder"):
        # Terraform prints only the ID of a held lock ("already locked: ID=…"), and its own lock
        # info beside it: the ID it reads names the holder too, so that a person sees who holds
        # it. The exact ID stays in error.lock.id.
        who = f" as {lock['who']}" if lock.get("who") and lock["who"] != lock["holder"] else ""
        body["ID"] = f"{lock['id']}, held by {lock['holder']}{who}"
    body["error"] = {"code": error.code, "message": error.message, **error.details}
    return JSONResponse(body, status_code=http_status)


def version_json(record: VersionRecord) -> dict[str, Any]:
    return {
        "serial": record.serial,
        "lineage": record.lineage,
        "sha256": record.sha256,
        "resources": record.resources,
        "created_at": iso(record.created_at),
        "created_by": record.writer,
        "run": {"id": record.run_id, "number": record.run_number, "phase": record.run_phase}
        if record.run_id
        else None,
    }


@endpoint
async def read_state(request: Request) -> Response:
    async with state_read(request) as (session, caller, unit):
        raw = await store.current_state(session, context_of(request).keyring, caller.stack, unit)
    if raw is None:
        raise NotFound("This stack has no state yet.")
    return _state_response(raw)


@endpoint
async def write_state(request: Request) -> Response:
    check_query(request, ["ID"])
    raw = await _body(request, MAX_STATE_BYTES)
    lock_id = request.query_params.get("ID") or None
    async with state_change(request) as (unit, caller, unit_path):
        written = await store.write_state(
            unit.session, context_of(request).keyring, caller, unit_path, raw, lock_id
        )
        answer = {
            "serial": written.serial,
            "lineage": written.lineage,
            "sha256": written.sha256,
            "resources": written.resources,
            "stored": written.created,
        }
    return JSONResponse(answer)


@endpoint
async def delete_state(request: Request) -> Response:
    check_query(request)
    async with state_change(request) as (unit, caller, unit_path):
        deleted = await store.delete_state(unit.session, caller, unit_path)
    return JSONResponse({"deleted_versions": deleted})


@endpoint
async def lock_state(request: Request) -> Response:
    check_query(request)
    info = parse_lock_info(await _body(request, MAX_LOCK_BYTES))
    try:
        async with state_change(request) as (unit, caller, unit_path):
            lock = await locks.lock_state(unit.session, caller, unit_path, info)
            if caller.actor is not None:
                await locks.person_lock_changed(unit, caller.stack.id)
    except StateLocked as error:
        return _lock_refusal(423, error)
    return JSONResponse({**info, "lock": lock})


@endpoint
async def unlock_state(request: Request) -> Response:
    check_query(request)
    raw = await _body(request, MAX_LOCK_BYTES)
    if not raw.strip():
        # `terraform force-unlock <ID>` sends UNLOCK without a body (its http client has no lock
        # info of its own to send): it is the force-unlock, whoever holds the lock.
        return await _force_unlock(request)
    info = parse_lock_info(raw)
    try:
        async with state_change(request) as (unit, caller, unit_path):
            if await locks.unlock_state(unit.session, caller, unit_path, info["ID"]):
                await locks.person_lock_changed(unit, caller.stack.id)
    except LockHeldByOther as error:
        return _lock_refusal(409, error)
    return JSONResponse({"unlocked": info["ID"]})


@endpoint
async def force_unlock(request: Request) -> Response:
    check_query(request)
    return await _force_unlock(request)


async def _force_unlock(request: Request) -> Response:
    async with state_change(request) as (unit, caller, unit_path):
        released = await locks.force_unlock(unit.session, caller, unit_path)
        if released is not None:
            await locks.person_lock_changed(unit, caller.stack.id)
    return JSONResponse({"released": released})


@endpoint
async def lock_status(request: Request) -> Response:
    async with state_read(request) as (session, caller, unit):
        head = await state_reads.head_of(session, caller.stack.id, unit)
        return JSONResponse({"lock": locks.lock_json(head)})


@endpoint
async def list_versions(request: Request) -> Response:
    async with state_read(request, "limit", "before") as (session, caller, unit):
        limit = int_param(request, "limit", DEFAULT_VERSIONS, 1, state_reads.MAX_VERSIONS)
        before = int_param(request, "before", None, 0, 2**62)
        head = await state_reads.head_of(session, caller.stack.id, unit)
        records = (
            await state_reads.versions(session, head.id, limit=limit or 1, before=before) if head else []
        )
        return JSONResponse({"versions": [version_json(r) for r in records]})


@endpoint
async def read_version(request: Request) -> Response:
    serial = request.path_params["serial"]
    async with state_read(request) as (session, caller, unit):
        raw = await store.version_state(session, context_of(request).keyring, caller.stack, unit, serial)
    return _state_response(raw)


@endpoint
async def list_outputs(request: Request) -> Response:
    async with state_read(request) as (session, caller, unit):
        outputs = await current_outputs(session, context_of(request).keyring, caller.stack, unit)
    return JSONResponse(
        {
            "outputs": [
                {"name": o.name, "type": o.type, "value": o.value, "sensitive": o.sensitive} for o in outputs
            ]
        }
    )


def _state_routes(prefix: str) -> list[Route]:
    """The routes of one state, named `state.<verb>`: the names the permission table and the
    audit trail key on, the same for a stack's root module and for its Terragrunt units."""
    s = f"{prefix}/state"
    return [
        Route(s, read_state, methods=["GET"], name="state.read"),
        Route(s, write_state, methods=["POST"], name="state.write"),
        Route(s, delete_state, methods=["DELETE"], name="state.delete"),
        Route(f"{s}/lock", lock_state, methods=["LOCK"], name="state.lock"),
        Route(f"{s}/lock", unlock_state, methods=["UNLOCK"], name="state.unlock"),
        Route(f"{s}/lock", force_unlock, methods=["DELETE"], name="state.force_unlock"),
        Route(f"{s}/lock", lock_status, methods=["GET"], name="state.lock_status"),
        Route(f"{s}/versions", list_versions, methods=["GET"], name="state.versions"),
        Route(f"{s}/versions/{{serial:int}}", read_version, methods=["GET"], name="state.version"),
        Route(f"{s}/outputs", list_outputs, methods=["GET"], name="state.outputs"),
    ]


ST = "/api/v1/orgs/{org}/stacks/{stack}"

routes = [*_state_routes(ST), *_state_routes(f"{ST}/units/{{unit:path}}")]
