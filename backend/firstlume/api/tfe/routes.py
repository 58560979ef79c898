"""The HCP Terraform API routes the Terraform CLI calls (adoption-api.md §7): discovery, ping,
account, entitlements, workspaces, configuration versions and their upload, runs and their
actions, plans and applies with their streamed logs, workspace locks, current state and outputs."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.cli_login_routes import login_service
from firstlume.api.rest.guard import need_of, remember_actor
from firstlume.api.rest.http import bearer_token, context_of, int_param, json_body
from firstlume.api.tfe import documents as docs
from firstlume.api.tfe import serializers as out
from firstlume.api.tfe.http import authenticated_in, change_in, document, read_in, tfe_endpoint
from firstlume.domain.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge
from firstlume.domain.runs import RunStatus
from firstlume.domain.state import normalize_unit, parse_state
from firstlume.services import accounts, catalog, runs
from firstlume.services.cli import configuration_versions, lookups, workspaces
from firstlume.services.cli import runs as cli_runs
from firstlume.services.reads import Session
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads import state as state_reads
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord
from firstlume.services.reads.runs import RunRecord
from firstlume.services.state import locks, store
from firstlume.services.state.callers import StateCaller

API_VERSION = "2.5"
V2 = "/api/v2"
UPLOADS = "/_tfe/configuration-versions"
LOGS = "/_tfe/logs"
STX, ETX = "\x02", "\x03"
PLAN_STEPS = ("checkout", "init", "plan")
APPLY_STEPS = ("apply",)
MAX_LOG_READ = 1024 * 1024


def _base(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"


# -- discovery, ping, account, organization ------------------------------------------------------


@tfe_endpoint
async def discovery(request: Request) -> Response:
    return JSONResponse(
        {
            "tfe.v2": f"{V2}/",
            "tfe.v2.1": f"{V2}/",
            "tfe.v2.2": f"{V2}/",
            "state.v2": f"{V2}/",
            "modules.v1": "/api/registry/v1/modules/",
            "motd.v1": f"{V2}/motd",
            "login.v1": login_service(),
        }
    )


@tfe_endpoint
async def ping(request: Request) -> Response:
    response = document({})
    response.headers["TFP-API-Version"] = API_VERSION
    response.headers["TFP-AppName"] = "Firstlume"
    response.headers["X-TFE-Version"] = "firstlume"
    return response


@tfe_endpoint
async def account_details(request: Request) -> Response:
    async with context_of(request).db.read() as session:
        actor = await accounts.authenticate(session, bearer_token(request))
        remember_actor(request, actor)
    attributes = {"username": actor.email.split("@")[0], "email": actor.email, "is-service-account": False}
    return document({"data": docs.resource("users", f"user-{actor.user_id}", attributes)})


@tfe_endpoint
async def organization(request: Request) -> Response:
    async with context_of(request).db.read() as session:
        _, org = await authenticated_in(session, request, request.path_params["org"])
    attributes = {"name": org.slug, "external-id": org.id, "permissions": {"can-create-workspace": True}}
    return document({"data": docs.resource("organizations", org.slug, attributes)})


@tfe_endpoint
async def entitlements(request: Request) -> Response:
    async with context_of(request).db.read() as session:
        _, org = await authenticated_in(session, request, request.path_params["org"])
    attributes = {
        "operations": True,
        "state-storage": True,
        "private-module-registry": False,
        "sentinel": False,
        "cost-estimation": False,
        "teams": False,
        "vcs-integrations": False,
        "agents": False,
        "sso": False,
    }
    return document({"data": docs.resource("entitlement-sets", org.id, attributes)})


@tfe_endpoint
async def run_queue(request: Request) -> Response:
    async with context_of(request).db.read() as session:
        await authenticated_in(session, request, request.path_params["org"])
    return document({"data": [], "meta": docs.page_meta(0)})


@tfe_endpoint
async def capacity(request: Request) -> Response:
    async with context_of(request).db.read() as session:
        _, org = await authenticated_in(session, request, request.path_params["org"])
    return document({"data": docs.resource("organization-capacity", org.id, {"pending": 0, "running": 0})})


# -- workspaces ----------------------------------------------------------------------------------------


async def _workspace(
    session: Session,
    org: OrganizationRecord,
    stack: StackRecord,
    role: str | None,
    tags: list[str] | None = None,
) -> dict[str, Any]:
    if tags is None:
        tags = (await workspaces.tags_of(session, [stack.id]))[stack.id]
    head = await state_reads.head_of(session, stack.id, ".")
    [active] = await run_reads.active_runs(session, [org.id], run_reads.RunFilter())
    current = next((r for r in active if r.stack_id == stack.id and r.status != RunStatus.QUEUED), None)
    return out.workspace_json(
        org,
        stack,
        locked=head is not None and head.lock_id is not None and head.lock_phase is None,
        current_run=f"run-{current.id}" if current else None,
        role=role,
        tags=tags,
    )


@tfe_endpoint
async def list_workspaces(request: Request) -> Response:
    async with context_of(request).db.read() as session:
        actor, org = await authenticated_in(session, request, request.path_params["org"])
        [stacks] = await catalog_reads.stacks_of_orgs(session, [org.id])
        name = request.query_params.get("search[name]")
        if name:
            stacks = [s for s in stacks if name in s.slug]
        tags = await workspaces.tags_of(session, [s.id for s in stacks])
        wanted = _wanted_tags(request)
        stacks = [s for s in stacks if wanted <= set(tags[s.id])]
        data = [await _workspace(session, org, s, actor.role, tags[s.id]) for s in stacks]
    return document({"data": data, "meta": docs.page_meta(len(data))})


def _wanted_tags(request: Request) -> set[str]:
    """The tags every listed workspace carries: `search[tags]` (comma-separated) and tag
    bindings (`filter[tagged][i][key]`, `…[value]`)."""
    wanted = {t.strip() for t in request.query_params.get("search[tags]", "").split(",") if t.strip()}
    for name, key in request.query_params.items():
        if name.startswith("filter[tagged][") and name.endswith("][key]"):
            value = request.query_params.get(name.removesuffix("[key]") + "[value]")
            wanted.add(f"{key}:{value}" if value else key)
    return wanted


@tfe_endpoint
async def get_workspace_by_name(request: Request) -> Response:
    async with context_of(request).db.read() as session:
        actor, org = await authenticated_in(session, request, request.path_params["org"])
        stack = await catalog.stack_by_slug(session, org, request.path_params["name"])
        return document({"data": await _workspace(session, org, stack, actor.role)})


@tfe_endpoint
async def create_workspace(request: Request) -> Response:
    raw = await json_body(request)
    ctx = context_of(request)
    async with ctx.unit() as unit:
        actor, org = await authenticated_in(unit.session, request, request.path_params["org"])
        body = docs.parse(docs.WorkspaceDocument, raw)
        stack, created = await workspaces.ensure_workspace(
            unit, ctx.keyring, org, body.data.attributes.name, body.data.tags()
        )
        if not created:
            raise Conflict(f"A workspace '{stack.slug}' already exists in this organization.", field="name")
        data = await _workspace(unit.session, org, stack, actor.role)
    return document({"data": data}, status_code=201)


def _ws(request: Request) -> Any:
    return lambda session: lookups.workspace_owner(session, request.path_params["workspace"])


@tfe_endpoint
async def get_workspace(request: Request) -> Response:
    async with read_in(request, _ws(request)) as (session, actor, org, owner):
        stack = await catalog.stack_by_slug(session, org, owner.stack_slug)
        return document({"data": await _workspace(session, org, stack, actor.role)})


# -- configuration versions ------------------------------------------------------------------------


def _cv_json(request: Request, version: Any, secret: str | None = None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "status": version.status,
        "error": None,
        "error-message": version.error,
        "speculative": version.speculative,
        "provisional": False,
        "auto-queue-runs": False,
        "source": "terraform-cli",
    }
    if secret is not None:
        attributes["upload-url"] = f"{_base(request)}{UPLOADS}/{version.id}/{secret}"
    return docs.resource("configuration-versions", f"cv-{version.id}", attributes)


@tfe_endpoint
async def create_configuration_version(request: Request) -> Response:
    body = docs.parse(docs.ConfigurationVersionDocument, await json_body(request))
    async with change_in(request, _ws(request)) as (unit, actor, org, owner):
        stack = await catalog.stack_by_slug(unit.session, org, owner.stack_slug)
        version, secret = await configuration_versions.create(
            unit.session, actor, stack, speculative=body.data.attributes.speculative
        )
        data = _cv_json(request, version, secret)
    return document({"data": data}, status_code=201)


@tfe_endpoint
async def get_configuration_version(request: Request) -> Response:
    cv_id = request.path_params["cv"]
    async with read_in(request, lambda s: lookups.configuration_version_owner(s, cv_id)) as (
        session,
        _,
        org,
        _o,
    ):
        version = await configuration_versions.in_org(session, org.id, cv_id.removeprefix("cv-"))
        return document({"data": _cv_json(request, version)})


async def _read_upload(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"The configuration is larger than {limit} bytes; nothing was stored.")
    received = bytearray()
    async for chunk in request.stream():
        received += chunk
        if len(received) > limit:
            raise PayloadTooLarge(f"The configuration is larger than {limit} bytes; nothing was stored.")
    return bytes(received)


@tfe_endpoint
async def upload_configuration(request: Request) -> Response:
    """The CLI's PUT of the .tar.gz: no token (go-tfe sends none to an upload URL), the URL's
    secret is the credential."""
    ctx = context_of(request)
    data = await _read_upload(request, ctx.settings.max_upload_bytes)
    async with ctx.unit() as unit:
        await configuration_versions.upload(
            unit, ctx.keyring, request.path_params["cv"], request.path_params["secret"], data
        )
    return Response(status_code=200)


# -- runs ---------------------------------------------------------------------------------------------


def _run_id(request: Request, prefix: str, what: str) -> Any:
    given = request.path_params["id"]
    return lambda session: lookups.run_owner(session, given, prefix, what)


async def _run_record(session: Session, org: OrganizationRecord, plain_id: str) -> RunRecord:
    run = await run_reads.run_in_org(session, org.id, plain_id)
    if run is None:
        raise NotFound(f"No run 'run-{plain_id}'.")
    return run


async def _run_document(session: Session, run: RunRecord, role: str | None) -> dict[str, Any]:
    record = await lookups.cli_run(session, run.id)
    destructive = run.summary_delete + run.summary_replace
    cli_confirms = record is not None and not record.auto_apply
    return out.run_json(
        run,
        confirmable=cli_runs.confirmable(run, destructive, cli_confirms=cli_confirms),
        role=role,
        message=record.message if record else None,
        auto_apply=bool(record.auto_apply) if record else False,
    )


@tfe_endpoint
async def create_run(request: Request) -> Response:
    body = docs.parse(docs.RunDocument, await json_body(request))
    attributes = body.data.attributes
    if body.data.relationships.configuration_version is None:
        raise InvalidRequest(
            "A run needs a configuration version: upload the code first (the CLI does).",
            field="relationships/configuration-version",
        )
    if attributes.target_addrs or attributes.replace_addrs or attributes.refresh_only:
        raise InvalidRequest(
            "Firstlume runs plan the whole configuration: -target, -replace and -refresh-only are not supported."
        )
    workspace_id = body.data.relationships.workspace.data.id
    cv_id = body.data.relationships.configuration_version.data.id
    async with change_in(request, lambda s: lookups.workspace_owner(s, workspace_id)) as (
        unit,
        actor,
        org,
        owner,
    ):
        stack = await catalog.stack_by_slug(unit.session, org, owner.stack_slug)
        version = await configuration_versions.in_org(unit.session, org.id, cv_id.removeprefix("cv-"))
        if version.stack_id != stack.id:
            raise InvalidRequest(
                f"The configuration version {cv_id} belongs to another workspace.",
                field="configuration-version",
            )
        run = await cli_runs.start(
            unit,
            actor,
            stack,
            version,
            destroy=attributes.is_destroy,
            auto_apply=bool(attributes.auto_apply),
            message=attributes.message,
        )
        data = await _run_document(unit.session, run, actor.role)
    return document({"data": data}, status_code=201)


@tfe_endpoint
async def get_run(request: Request) -> Response:
    async with read_in(request, _run_id(request, "run-", "run")) as (session, actor, org, _):
        run = await _run_record(session, org, request.path_params["id"].removeprefix("run-"))
        return document({"data": await _run_document(session, run, actor.role)})


@tfe_endpoint
async def run_events(request: Request) -> Response:
    """Policy and task warnings of a run: Firstlume has none to tell the CLI."""
    async with read_in(request, _run_id(request, "run-", "run")) as (session, _, org, _o):
        await _run_record(session, org, request.path_params["id"].removeprefix("run-"))
    return document({"data": [], "meta": docs.page_meta(0)})


@tfe_endpoint
async def list_workspace_runs(request: Request) -> Response:
    async with read_in(request, _ws(request)) as (session, actor, org, owner):
        rows = await lookups.workspace_runs(session, owner.stack_id, 100)
        data = []
        for row in rows:
            run = await _run_record(session, org, row.id)
            data.append(await _run_document(session, run, actor.role))
    return document({"data": data, "meta": docs.page_meta(len(data))})


@tfe_endpoint
async def apply_run(request: Request) -> Response:
    await json_body(request)
    async with change_in(request, _run_id(request, "run-", "run")) as (unit, actor, org, _):
        plain = request.path_params["id"].removeprefix("run-")
        run = await _run_record(unit.session, org, plain)
        if not cli_runs.confirmable(run, run.summary_delete + run.summary_replace, cli_confirms=True):
            raise Conflict(
                f"Run run-{plain} cannot be confirmed from the CLI (it is {run.status}); its stack's rules ask "
                f"for an approval in Firstlume: {_run_page(request, org.slug, run.id)}"
            )
        await cli_runs.apply(unit, actor, org, run)
    return Response(status_code=202)


@tfe_endpoint
async def discard_run(request: Request) -> Response:
    await json_body(request)
    async with change_in(request, _run_id(request, "run-", "run")) as (unit, actor, org, _):
        from firstlume.services.commands import DiscardRun

        await runs.discard_run(unit, actor, org, request.path_params["id"].removeprefix("run-"), DiscardRun())
    return Response(status_code=202)


@tfe_endpoint
async def cancel_run(request: Request) -> Response:
    await json_body(request)
    async with change_in(request, _run_id(request, "run-", "run")) as (unit, actor, org, _):
        from firstlume.services.commands import CancelRun

        await runs.cancel_run(unit, actor, org, request.path_params["id"].removeprefix("run-"), CancelRun())
    return Response(status_code=202)


# -- plans and applies, and their logs ----------------------------------------------------------------


@tfe_endpoint
async def get_plan(request: Request) -> Response:
    async with read_in(request, _run_id(request, "plan-", "plan")) as (session, _, org, _o):
        run = await _run_record(session, org, request.path_params["id"].removeprefix("plan-"))
    url = _log_url(request, "plan", run.id)
    waits = cli_runs.needs_firstlume_approval(run, run.summary_delete + run.summary_replace)
    return document({"data": out.plan_json(run, url, waits_for_approval=waits)})


@tfe_endpoint
async def get_apply(request: Request) -> Response:
    async with read_in(request, _run_id(request, "apply-", "apply")) as (session, _, org, _o):
        run = await _run_record(session, org, request.path_params["id"].removeprefix("apply-"))
    url = _log_url(request, "apply", run.id)
    return document({"data": out.apply_json(run, url)})


def _log_url(request: Request, phase: str, run_id: str) -> str:
    """A log's read URL: the CLI reads it without its token, so the URL carries its own
    credential, sealed with the key ring and bound to the run and phase (it opens no other)."""
    seal = context_of(request).keyring.encrypt(b"", _log_context(phase, run_id))
    return f"{_base(request)}{LOGS}/{phase}/{run_id}/{base64.urlsafe_b64encode(seal).decode().rstrip('=')}"


def _log_context(phase: str, run_id: str) -> str:
    return f"tfe-log:{phase}:{run_id}"


def _check_log_seal(request: Request, phase: str, run_id: str) -> None:
    given = request.path_params["seal"]
    try:
        seal = base64.urlsafe_b64decode(given + "=" * (-len(given) % 4))
        context_of(request).keyring.decrypt(seal, _log_context(phase, run_id))
    except Exception:
        raise NotFound("No log at this URL.") from None


def _run_page(request: Request, org_slug: str, run_id: str) -> str:
    return f"{_base(request)}/orgs/{org_slug}/runs/{run_id}"


def _approval_notice(request: Request, org_slug: str, run_id: str, destructive: bool) -> str:
    why = (
        "its destructive changes must be confirmed one by one"
        if destructive
        else "it needs one of the stack's named approvers, or someone other than who started it"
    )
    return (
        f"\nThis run must be approved in Firstlume ({why}): {_run_page(request, org_slug, run_id)}\n"
        "Waiting for the approval there...\n"
    )


@tfe_endpoint
async def read_log(request: Request) -> Response:
    """A phase's log as the CLI reads it: bytes from `offset`, at most `limit`; STX first, and
    ETX once the phase is over (its status is read first, so every byte it logged is in)."""
    phase, run_id = request.path_params["phase"], request.path_params["run"]
    if phase not in ("plan", "apply"):
        raise NotFound("No log at this URL.")
    _check_log_seal(request, phase, run_id)
    offset = int_param(request, "offset", 0, 0, 2**62) or 0
    limit = int_param(request, "limit", MAX_LOG_READ, 1, 2**31) or MAX_LOG_READ
    steps, done = (PLAN_STEPS, out.PLAN_DONE) if phase == "plan" else (APPLY_STEPS, out.APPLY_DONE)
    async with context_of(request).db.read() as session:
        run = await lookups.run_row(session, run_id)
        org_slug = (await lookups.run_owner(session, f"run-{run.id}")).org_slug
        finished = RunStatus(run.status) in done
        text = await lookups.log_text(session, run.id, steps)
    destructive = run.summary_delete + run.summary_replace
    if phase == "plan" and finished and cli_runs.approval_in_firstlume(run, destructive):
        # The CLI's "yes" is not enough: the plan's log says where to approve, and stays open
        # until the run is approved (or discarded) in Firstlume; the CLI waits meanwhile.
        finished = not cli_runs.needs_firstlume_approval(run, destructive)
        text += _approval_notice(request, org_slug, run.id, bool(run.confirm_destructive and destructive))
    whole = (STX + text + (ETX if finished else "")).encode()
    return Response(whole[offset : offset + min(limit, MAX_LOG_READ)], media_type="text/plain")


# -- state ------------------------------------------------------------------------------------------


def _sv_json(request: Request, version_id: int, serial: int, stack_id: str) -> dict[str, Any]:
    attributes = {
        "serial": serial,
        "status": "finished",
        "resources-processed": True,
        "hosted-state-download-url": f"{_base(request)}{V2}/state-versions/sv-{version_id}/download",
    }
    relationships = {"workspace": docs.related("workspaces", out.workspace_id(stack_id))}
    return docs.resource("state-versions", f"sv-{version_id}", attributes, relationships)


@tfe_endpoint
async def current_state_version(request: Request) -> Response:
    async with read_in(request, _ws(request)) as (_session, _, _org, owner):
        current = await lookups.current_version_id(_session, owner.stack_id)
    if current is None:
        raise NotFound("This workspace has no state yet.")
    return document({"data": _sv_json(request, current[0], current[1], owner.stack_id)})


@tfe_endpoint
async def download_state_version(request: Request) -> Response:
    ctx = context_of(request)
    sv_id = request.path_params["sv"]
    async with ctx.db.read() as session:
        await accounts.authenticate(session, bearer_token(request))
        owner, serial = await lookups.state_version_owner(session, sv_id)
        _, org = await authenticated_in(session, request, owner.org_slug)
        stack = await catalog.stack_by_slug(session, org, owner.stack_slug)
        raw = await store.version_state(session, ctx.keyring, stack, ".", serial)
    return Response(raw, media_type="application/json")


# go-tfe's StateVersions.Upload creates the version without its state, then uploads it to a URL;
# given this answer (HCP Terraform's, from servers without that URL), the CLI sends the state
# inline in the create request instead: Firstlume takes it there, in one transaction.
INLINE_STATE_ONLY = "param is missing or the value is empty: state"


@tfe_endpoint
async def create_state_version(request: Request) -> Response:
    """`terraform state push` and `state rm` (and any state the CLI writes itself): a new
    version of the stack's managed state, under the workspace lock the CLI took, audited."""
    body = docs.parse(docs.StateVersionDocument, await json_body(request))
    attributes = body.data.attributes
    if not attributes.state:
        raise InvalidRequest(f"{INLINE_STATE_ONLY} (send the state inline, base64).", field="state")
    try:
        raw = base64.b64decode(attributes.state, validate=True)
    except ValueError:
        raise InvalidRequest("The state is not valid base64.", field="state") from None
    if hashlib.md5(raw).hexdigest() != attributes.md5.lower():
        raise InvalidRequest(
            "The state's md5 is not the md5 of the state sent: nothing was stored.", field="md5"
        )
    sent = parse_state(raw)
    if sent.serial != attributes.serial or (attributes.lineage and sent.lineage != attributes.lineage):
        raise InvalidRequest(
            "The serial and lineage given are not the state's own: nothing was stored.", field="serial"
        )
    ctx = context_of(request)
    async with change_in(request, _ws(request)) as (unit, actor, org, owner):
        stack = await catalog.stack_by_slug(unit.session, org, owner.stack_slug)
        caller = StateCaller(org=org, stack=stack, actor=actor)
        lock_id = f"{org.slug}/{stack.slug}"  # the workspace lock (lock_workspace)
        head = await state_reads.head_of(unit.session, stack.id, ".")
        if head is None or head.lock_id is None:
            raise Conflict(
                "Lock the workspace before writing its state (terraform does it for state push and "
                "state rm): nothing was stored."
            )
        written = await store.write_state(
            unit.session, ctx.keyring, caller, ".", raw, lock_id, force=attributes.force
        )
        current = await lookups.current_version_id(unit.session, stack.id)
        assert current is not None
    data = _sv_json(request, current[0], written.serial, stack.id)
    return document({"data": data}, status_code=201)


@tfe_endpoint
async def current_outputs(request: Request) -> Response:
    """The current state's root outputs. A sensitive one goes without its value and without its
    detailed type: the CLI then reads the outputs from the state itself (its fallback, which needs
    the operator's right to read state), so no secret is ever in this answer."""
    ctx = context_of(request)
    async with read_in(request, _ws(request)) as (session, _, org, owner):
        stack = await catalog.stack_by_slug(session, org, owner.stack_slug)
        raw = await store.current_state(session, ctx.keyring, stack, ".")
    outputs = json.loads(raw).get("outputs", {}) if raw else {}
    data = []
    for name, output in outputs.items() if isinstance(outputs, dict) else ():
        sensitive = bool(output.get("sensitive"))
        attributes: dict[str, Any] = {
            "name": name,
            "sensitive": sensitive,
            "type": _simple_type(output.get("type")),
            "value": None if sensitive else output.get("value"),
        }
        if not sensitive:
            attributes["detailed-type"] = output.get("type")
        data.append(docs.resource("state-version-outputs", f"wsout-{owner.stack_id}-{name}", attributes))
    return document({"data": data, "meta": docs.page_meta(len(data))})


def _simple_type(detailed: Any) -> str:
    kind = detailed[0] if isinstance(detailed, list) and detailed else detailed
    return {"object": "object", "tuple": "array", "list": "array", "set": "array", "map": "object"}.get(
        str(kind), str(kind)
    )


async def _workspace_lock_caller(session: Session, request: Request) -> tuple[StateCaller, str]:
    await accounts.authenticate(session, bearer_token(request))
    owner = await lookups.workspace_owner(session, request.path_params["workspace"])
    actor, org = await authenticated_in(session, request, owner.org_slug)
    stack = await catalog.stack_by_slug(session, org, owner.stack_slug)
    return StateCaller(org=org, stack=stack, actor=actor), f"{org.slug}/{stack.slug}"


@tfe_endpoint
async def lock_workspace(request: Request) -> Response:
    reason = docs.parse(docs.LockReason, await json_body(request))
    async with context_of(request).unit() as unit:
        caller, lock_id = await _workspace_lock_caller(unit.session, request)
        head = await state_reads.head_of(unit.session, caller.stack.id, ".")
        if head is not None and head.lock_id == lock_id:
            # HCP Terraform's answer to a second lock (another holder's is refused by lock_state,
            # once a dead run's lock has been released).
            raise Conflict(f"The workspace is already locked by {head.lock_holder} (lock {head.lock_id}).")
        info = {
            "ID": lock_id,
            "Operation": "OperationTypeInvalid",
            "Info": reason.reason or "",
            "Who": caller.name,
        }
        try:
            await locks.lock_state(unit.session, caller, normalize_unit("."), info)
        except locks.StateLocked as error:
            raise Conflict(error.message, **error.details) from None
        await locks.person_lock_changed(unit, caller.stack.id)
        data = await _workspace(
            unit.session, caller.org, caller.stack, caller.actor.role if caller.actor else None
        )
    return document({"data": data})


@tfe_endpoint
async def unlock_workspace(request: Request) -> Response:
    async with context_of(request).unit() as unit:
        caller, lock_id = await _workspace_lock_caller(unit.session, request)
        if request.url.path.endswith("force-unlock"):
            await locks.force_unlock(unit.session, caller, ".")
        else:
            await locks.unlock_state(unit.session, caller, ".", lock_id)
        await locks.person_lock_changed(unit, caller.stack.id)
        data = await _workspace(
            unit.session, caller.org, caller.stack, caller.actor.role if caller.actor else None
        )
    return document({"data": data})


@tfe_endpoint
async def run_page(request: Request) -> Response:
    """The address the CLI prints for a run (HCP Terraform's `/app/<org>/<workspace>/runs/<id>`):
    the run's page in Firstlume's UI, which asks for sign-in as any page does."""
    org, run_id = request.path_params["org"], request.path_params["run"].removeprefix("run-")
    return RedirectResponse(f"/orgs/{quote(org)}/runs/{quote(run_id)}", status_code=302)


@tfe_endpoint
async def motd(request: Request) -> Response:
    return JSONResponse({"msg": ""})


W = f"{V2}/workspaces/{{workspace}}"

routes = [
    Route("/.well-known/terraform.json", discovery, methods=["GET"], name="tfe.discovery"),
    Route(f"{V2}/ping", ping, methods=["GET"], name="tfe.ping"),
    Route(f"{V2}/motd", motd, methods=["GET"], name="tfe.motd"),
    Route("/app/{org}/{workspace}/runs/{run}", run_page, methods=["GET"], name="tfe.run_page"),
    Route(f"{V2}/account/details", account_details, methods=["GET"], name="tfe.account_details"),
    Route(f"{V2}/organizations/{{org}}", organization, methods=["GET"], name="tfe.organization"),
    Route(
        f"{V2}/organizations/{{org}}/entitlement-set", entitlements, methods=["GET"], name="tfe.entitlements"
    ),
    Route(f"{V2}/organizations/{{org}}/runs/queue", run_queue, methods=["GET"], name="tfe.run_queue"),
    Route(f"{V2}/organizations/{{org}}/capacity", capacity, methods=["GET"], name="tfe.capacity"),
    Route(
        f"{V2}/organizations/{{org}}/workspaces", list_workspaces, methods=["GET"], name="tfe.list_workspaces"
    ),
    Route(
        f"{V2}/organizations/{{org}}/workspaces",
        create_workspace,
        methods=["POST"],
        name="tfe.create_workspace",
    ),
    Route(
        f"{V2}/organizations/{{org}}/workspaces/{{name}}",
        get_workspace_by_name,
        methods=["GET"],
        name="tfe.workspace_by_name",
    ),
    Route(W, get_workspace, methods=["GET"], name="tfe.workspace"),
    Route(
        f"{W}/configuration-versions", create_configuration_version, methods=["POST"], name="tfe.create_cv"
    ),
    Route(f"{W}/runs", list_workspace_runs, methods=["GET"], name="tfe.workspace_runs"),
    Route(f"{W}/state-versions", create_state_version, methods=["POST"], name="tfe.create_state_version"),
    Route(f"{W}/current-state-version", current_state_version, methods=["GET"], name="tfe.current_state"),
    Route(f"{W}/current-state-version-outputs", current_outputs, methods=["GET"], name="tfe.current_outputs"),
    Route(f"{W}/actions/lock", lock_workspace, methods=["POST"], name="tfe.lock"),
    Route(f"{W}/actions/unlock", unlock_workspace, methods=["POST"], name="tfe.unlock"),
    Route(f"{W}/actions/force-unlock", unlock_workspace, methods=["POST"], name="tfe.force_unlock"),
    Route(f"{V2}/configuration-versions/{{cv}}", get_configuration_version, methods=["GET"], name="tfe.cv"),
    Route(f"{UPLOADS}/{{cv}}/{{secret}}", upload_configuration, methods=["PUT"], name="tfe.upload"),
    Route(f"{V2}/runs", create_run, methods=["POST"], name="tfe.create_run"),
    Route(f"{V2}/runs/{{id}}", get_run, methods=["GET"], name="tfe.run"),
    Route(f"{V2}/runs/{{id}}/run-events", run_events, methods=["GET"], name="tfe.run_events"),
    Route(f"{V2}/runs/{{id}}/actions/apply", apply_run, methods=["POST"], name="tfe.apply_run"),
    Route(f"{V2}/runs/{{id}}/actions/discard", discard_run, methods=["POST"], name="tfe.discard_run"),
    Route(f"{V2}/runs/{{id}}/actions/cancel", cancel_run, methods=["POST"], name="tfe.cancel_run"),
    Route(f"{V2}/plans/{{id}}", get_plan, methods=["GET"], name="tfe.plan"),
    Route(f"{V2}/applies/{{id}}", get_apply, methods=["GET"], name="tfe.apply"),
    Route(f"{LOGS}/{{phase}}/{{run}}/{{seal}}", read_log, methods=["GET"], name="tfe.log"),
    Route(
        f"{V2}/state-versions/{{sv}}/download",
        download_state_version,
        methods=["GET"],
        name="tfe.state_download",
    ),
]

__all__ = ["json", "need_of", "routes"]
