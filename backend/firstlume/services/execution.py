"""What executors report, and how the control plane records it. Executors authenticate with a
token valid for one phase of one run; everything here checks that the run is still in that phase."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import hash_token
from firstlume.db.models import LogChunk, PhaseToken, PlanArtifact, ResourceChange, Run, RunStep, Stack
from firstlume.db.types import utcnow
from firstlume.domain.changes import Change, changes_from_plan, summarize
from firstlume.domain.errors import Conflict, InvalidRequest, NotFound, Unauthenticated
from firstlume.domain.runs import (
    FINISHED_STEP_STATUSES,
    Phase,
    RunStatus,
    RunType,
    is_running_phase,
    status_after_plan,
)
from firstlume.pubsub import run_channel
from firstlume.services.context import Context, Unit
from firstlume.services.inherited import effective_settings, effective_variables
from firstlume.services.steps import set_step
from firstlume.services.transitions import change_status
from firstlume.services.validation import require_str

STEP_STATUSES = ("running", "done", "failed", "skipped")
RESOURCE_STATES = ("pending", "applying", "done", "failed", "not_applied")
# A pub/sub message names changed resources only while it stays well under NOTIFY's 8000 bytes.
MAX_ADDRESSES_PER_EVENT = 50


class StepOutOfOrder(Conflict):
    code = "step_out_of_order"


class LogGap(Conflict):
    code = "log_gap"


class PlanMismatch(Conflict):
    code = "plan_mismatch"


def _context(run_id: str, part: str) -> str:
    return f"plan:{run_id}:{part}"


async def authenticate_phase(
    session: AsyncSession, token: str | None, *, lock: bool = False
) -> tuple[Run, PhaseToken]:
    if not token:
        raise Unauthenticated("Send the executor's phase token: 'Authorization: Bearer <token>'.")
    row = await session.scalar(
        select(PhaseToken).where(PhaseToken.token_hash == hash_token(token), PhaseToken.revoked_at.is_(None))
    )
    if row is None:
        raise Unauthenticated("This executor token is not valid, or its phase has ended.")
    query = select(Run).where(Run.id == row.run_id)
    if lock:
        query = query.with_for_update()
    run = await session.scalar(query)
    if run is None or not is_running_phase(run.status, run.phase_attempt, row.phase, row.attempt):
        raise Unauthenticated("This executor token is not valid, or its phase has ended.")
    return run, row


async def phase_spec(ctx: Context, session: AsyncSession, run: Run, token: PhaseToken) -> dict[str, Any]:
    stack = await session.get(Stack, run.stack_id)
    assert stack is not None
    git_context = f"stack-git:{stack.id}"
    if token.phase == Phase.PLAN:
        variables = [
            {"name": v.name, "value": v.value, "sensitive": v.sensitive, "kind": v.kind, "origin": v.origin}
            for v in await effective_variables(session, ctx.keyring, stack)
        ]
        commit_sha = None
    else:
        artifact = await _artifact(session, run)
        variables = json.loads(
            ctx.keyring.decrypt_text(artifact.variables_sealed, _context(run.id, "variables"))
        )
        commit_sha = run.commit_sha
    return {
        "run_id": run.id,
        "phase": token.phase,
        "attempt": token.attempt,
        "run_type": run.type,
        "stack": {
            "slug": stack.slug,
            "repository": stack.repository,
            "branch": stack.branch,
            "path": stack.path,
        },
        "git_auth": {
            "https_token": ctx.keyring.decrypt_text(stack.git_https_token_sealed, git_context)
            if stack.git_https_token_sealed
            else None,
            "ssh_private_key": ctx.keyring.decrypt_text(stack.git_ssh_key_sealed, git_context)
            if stack.git_ssh_key_sealed
            else None,
        },
        "commit_sha": commit_sha,
        "variables": variables,
        "log_offset": run.log_length,
        "heartbeat_interval_seconds": ctx.settings.executor_heartbeat_interval,
    }


async def heartbeat(session: AsyncSession, run: Run) -> None:
    await session.execute(update(Run).where(Run.id == run.id).values(heartbeat_at=utcnow()))


def _str_field(
    body: dict[str, Any], name: str, *, required: bool = True, max_length: int = 100_000
) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    return require_str(name, value, max_length=max_length, allow_empty=True)


async def record_commit(unit: Unit, run: Run, token: PhaseToken, body: dict[str, Any]) -> None:
    if token.phase != Phase.PLAN:
        raise Conflict("The commit is recorded by the plan phase; an apply uses the plan's commit.")
    run.commit_sha = _str_field(body, "sha", max_length=64)
    run.commit_author = _str_field(body, "author", max_length=500)
    message = _str_field(body, "message", max_length=100_000) or ""
    run.commit_message = message.splitlines()[0][:1000] if message else ""
    run.commit_url = _str_field(body, "url", required=False, max_length=2000)
    unit.publish_after_commit(run_channel(run.id), {"type": "run", "run_id": run.id})


async def record_configuration(unit: Unit, run: Run, token: PhaseToken, body: dict[str, Any]) -> None:
    if token.phase != Phase.PLAN:
        return  # an apply runs with the configuration its plan recorded
    run.config_yaml = _str_field(body, "config_yaml", required=False, max_length=1_000_000)
    run.engine = _str_field(body, "engine", max_length=20)
    variables = body.get("variables", [])
    if not isinstance(variables, list):
        raise InvalidRequest("'variables' must be a list.", field="variables")
    cleaned = []
    for item in variables:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise InvalidRequest("Each variable needs a 'name'.", field="variables")
        # Names and origins only: a value sent here by mistake is dropped, never stored.
        cleaned.append(
            {
                "name": item["name"],
                "origin": str(item.get("origin", "")),
                "sensitive": bool(item.get("sensitive", False)),
                "kind": str(item.get("kind", "terraform")),
            }
        )
    run.variables_used = cleaned
    unit.publish_after_commit(run_channel(run.id), {"type": "run", "run_id": run.id})


async def record_step(unit: Unit, run: Run, body: dict[str, Any]) -> None:
    name = _str_field(body, "name", max_length=50)
    status = body.get("status")
    if status not in STEP_STATUSES:
        raise InvalidRequest(f"'status' must be one of {', '.join(STEP_STATUSES)}.", field="status")
    step = await unit.session.scalar(select(RunStep).where(RunStep.run_id == run.id, RunStep.name == name))
    current = step.status if step else None
    if status == current:
        return  # a retried report
    if status == "running" and current in FINISHED_STEP_STATUSES:
        raise StepOutOfOrder(f"Step '{name}' has already ended ({current}); it cannot start again.")
    if status in ("done", "failed") and current != "running":
        raise StepOutOfOrder(f"Step '{name}' is {current or 'not started'}; only a running step can end.")
    assert name is not None
    await set_step(unit, run, name, status)


async def append_log(unit: Unit, run: Run, body: dict[str, Any]) -> int:
    """Appends at the run log's end. A batch that starts before the end is a retry: the part
    already stored is skipped, so nothing is doubled. One that starts past the end is refused."""
    offset = body.get("offset")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InvalidRequest("'offset' must be a non-negative integer.", field="offset")
    step = _str_field(body, "step", max_length=50)
    text = _str_field(body, "text", max_length=5_000_000, required=True)
    assert step is not None and text is not None
    end = run.log_length
    if offset > end:
        raise LogGap(f"The log ends at {end}; a batch at {offset} would leave a gap.", expected_offset=end)
    new_text = text[end - offset :]
    if not new_text:
        return end
    unit.session.add(LogChunk(run_id=run.id, offset=end, step=step, text=new_text))
    run.log_length = end + len(new_text)
    await unit.session.flush()
    unit.publish_after_commit(
        run_channel(run.id),
        {"type": "log", "run_id": run.id, "step": step, "offset": end, "end": run.log_length},
    )
    return run.log_length


async def record_state_backends(unit: Unit, run: Run, body: dict[str, Any]) -> None:
    backends = body.get("backends")
    if not isinstance(backends, list) or not all(
        isinstance(b, dict) and isinstance(b.get("unit"), str) and isinstance(b.get("backend"), str)
        for b in backends
    ):
        raise InvalidRequest("'backends' must be a list of {unit, backend}.", field="backends")
    run.state_backends = [{"unit": b["unit"], "backend": b["backend"]} for b in backends]
    unit.publish_after_commit(run_channel(run.id), {"type": "run", "run_id": run.id})


async def store_plan(
    ctx: Context, unit: Unit, run: Run, token: PhaseToken, body: dict[str, Any]
) -> dict[str, Any]:
    if token.phase != Phase.PLAN:
        raise Conflict("Only the plan phase uploads a plan.")
    session = unit.session
    if await session.get(PlanArtifact, run.id) is not None:
        raise Conflict("This run already has a plan.")
    try:
        plan_file = base64.b64decode(
            _str_field(body, "plan_file_b64", max_length=500_000_000) or "", validate=True
        )
    except (binascii.Error, ValueError):
        raise InvalidRequest("'plan_file_b64' must be base64.", field="plan_file_b64") from None
    plan_json = body.get("plan_json")
    if not isinstance(plan_json, dict):
        raise InvalidRequest(
            "'plan_json' must be the object `terraform show -json` prints.", field="plan_json"
        )
    lock_file = _str_field(body, "lock_file", required=False, max_length=10_000_000)
    variables = body.get("variables", [])
    if not isinstance(variables, list):
        raise InvalidRequest("'variables' must be a list.", field="variables")
    try:
        changes = _changes_of_units(plan_json)
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidRequest(f"'plan_json' is not a Terraform plan: {error}.", field="plan_json") from None
    keyring = ctx.keyring
    session.add(
        PlanArtifact(
            run_id=run.id,
            plan_file_sealed=keyring.encrypt(plan_file, _context(run.id, "plan_file")),
            plan_json_sealed=keyring.encrypt(json.dumps(plan_json).encode(), _context(run.id, "plan_json")),
            lock_file_sealed=keyring.encrypt_text(lock_file, _context(run.id, "lock_file"))
            if lock_file
            else None,
            variables_sealed=keyring.encrypt_text(json.dumps(variables), _context(run.id, "variables")),
            plan_sha256=hashlib.sha256(plan_file).hexdigest(),
        )
    )
    if changes:
        await session.execute(
            insert(ResourceChange),
            [
                {
                    "run_id": run.id,
                    "position": position,
                    "address": change.address,
                    "type": change.type,
                    "unit": change.unit,
                    "action": change.action,
                    "attributes": [
                        {
                            "name": a.name,
                            "before": a.before,
                            "after": a.after,
                            "forces_replacement": a.forces_replacement,
                        }
                        for a in change.attributes
                    ],
                    "replaced_because": list(change.replaced_because),
                    "state": None,
                    "error": None,
                    "stages": [{"action": action, "state": None} for action in change.stage_order],
                }
                for position, change in enumerate(changes)
            ],
        )
    summary = summarize(changes)
    run.summary_delete, run.summary_replace = summary.delete, summary.replace
    run.summary_update, run.summary_create = summary.update, summary.create
    run.has_plan = True
    await session.flush()
    unit.publish_after_commit(run_channel(run.id), {"type": "changes", "run_id": run.id})
    return {"summary": summary.as_dict(), "has_changes": summary.has_changes}


def _changes_of_units(plan_json: dict[str, Any]) -> list[Change]:
    """One Terraform root's plan, or Terragrunt `run --all` plans keyed by unit path."""
    units = plan_json.get("terragrunt_units")
    plans = sorted(units.items()) if isinstance(units, dict) else [(".", plan_json)]
    for _, plan in plans:
        if not isinstance(plan, dict) or not isinstance(plan.get("format_version"), str):
            raise ValueError("it has no format_version, as `show -json` output always does")
    return [change for unit, plan in plans for change in changes_from_plan(plan, unit=unit)]


async def _artifact(session: AsyncSession, run: Run) -> PlanArtifact:
    artifact = await session.get(PlanArtifact, run.id)
    if artifact is None:
        raise NotFound("This run has no stored plan.")
    return artifact


async def load_plan(ctx: Context, session: AsyncSession, run: Run, token: PhaseToken) -> dict[str, Any]:
    if token.phase != Phase.APPLY:
        raise Conflict("Only the apply phase downloads the plan.")
    artifact = await _artifact(session, run)
    keyring = ctx.keyring
    plan_file = keyring.decrypt(artifact.plan_file_sealed, _context(run.id, "plan_file"))
    if hashlib.sha256(plan_file).hexdigest() != artifact.plan_sha256:
        raise PlanMismatch("The stored plan file does not match its recorded hash.")
    return {
        "plan_file_b64": base64.b64encode(plan_file).decode(),
        "sha256": artifact.plan_sha256,
        "lock_file": keyring.decrypt_text(artifact.lock_file_sealed, _context(run.id, "lock_file"))
        if artifact.lock_file_sealed
        else None,
        "variables": json.loads(
            keyring.decrypt_text(artifact.variables_sealed, _context(run.id, "variables"))
        ),
        "config_yaml": run.config_yaml,
        "commit_sha": run.commit_sha,
    }


async def record_resources(unit: Unit, run: Run, token: PhaseToken, body: dict[str, Any]) -> None:
    if token.phase != Phase.APPLY:
        raise Conflict("Resource states are reported by the apply phase.")
    updates = body.get("updates")
    if not isinstance(updates, list):
        raise InvalidRequest("'updates' must be a list.", field="updates")
    by_address: dict[str, dict[str, Any]] = {}
    for item in updates:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("address"), str)
            or item.get("state") not in RESOURCE_STATES
        ):
            raise InvalidRequest(
                f"Each update needs an 'address' and a 'state' among {', '.join(RESOURCE_STATES)}.",
                field="updates",
            )
        by_address[item["address"]] = item
    if not by_address:
        return
    rows = await unit.session.scalars(
        select(ResourceChange).where(
            ResourceChange.run_id == run.id, ResourceChange.address.in_(list(by_address))
        )
    )
    changed = []
    for row in rows:
        item = by_address[row.address]
        row.state = item["state"]
        error = item.get("error")
        row.error = error if isinstance(error, str) else None
        stages = item.get("stages")
        if isinstance(stages, list) and stages:
            row.stages = [
                {"action": str(s.get("action")), "state": str(s.get("state"))}
                for s in stages
                if isinstance(s, dict)
            ]
        changed.append(row.address)
    await unit.session.flush()
    event: dict[str, Any] = {"type": "resources", "run_id": run.id}
    if len(changed) <= MAX_ADDRESSES_PER_EVENT:
        event["addresses"] = changed
    unit.publish_after_commit(run_channel(run.id), event)


async def fail_run(unit: Unit, run: Run, reason: str, *, actor: str | None = None) -> Run:
    """Ends a running phase as failed with `reason` as the run's error (the lifecycle's effects
    revoke its token, fail its running steps and mark unstarted resources not_applied)."""
    return await change_status(unit, run, RunStatus.FAILED, actor=actor, reason=reason, error=reason)


async def finish_phase(unit: Unit, run: Run, token: PhaseToken, body: dict[str, Any]) -> Run:
    status = body.get("status")
    if status not in ("succeeded", "failed"):
        raise InvalidRequest("'status' must be succeeded or failed.", field="status")
    error = body.get("error")
    if error is not None and not isinstance(error, str):
        raise InvalidRequest("'error' must be a string or null.", field="error")
    session = unit.session
    if status == "failed":
        return await fail_run(
            unit, run, (error or "The executor reported a failure.")[:20_000], actor="executor"
        )
    if token.phase == Phase.APPLY:
        return await change_status(unit, run, RunStatus.APPLIED, actor="executor")
    if not run.has_plan:
        return await fail_run(unit, run, "The plan phase ended without uploading a plan.", actor="executor")
    run_type = RunType(run.type)
    has_changes = bool(run.summary_delete or run.summary_replace or run.summary_update or run.summary_create)
    recorded: dict[str, Any] = {}
    if run_type.intends_to_apply:
        # The approval rules are read now, when the plan finishes, and recorded with their origins.
        stack = await session.get(Stack, run.stack_id)
        assert stack is not None
        rules = await effective_settings(session, stack)
        recorded = {
            "approval_required": bool(rules["require_approval"].value),
            "approval_required_origin": rules["require_approval"].origin,
            "confirm_destructive": bool(rules["confirm_destructive"].value),
            "confirm_destructive_origin": rules["confirm_destructive"].origin,
        }
    target = status_after_plan(run_type, has_changes, bool(recorded.get("approval_required")))
    return await change_status(unit, run, target, actor="executor", **recorded)
