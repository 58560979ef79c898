"""The JSON shapes of docs/rest-api.md, made from the read layer's records: no statement here."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from firstlume.domain.changes import GROUPS
from firstlume.domain.inheritance import Resolved
from firstlume.domain.policies import approvals_text
from firstlume.domain.runs import TriggerKind
from firstlume.services.reads.catalog import FolderRecord, StackRecord
from firstlume.services.reads.changes import ChangeRecord, OutputChangeRecord
from firstlume.services.reads.runs import RunDetails, RunRecord, duration_ms, summary_of
from firstlume.services.reads.settings import VariableRecord


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def trigger_json(run: RunRecord) -> dict[str, Any]:
    """What started the run. A CLI run names the configuration version it plans (which the
    run's delivery column holds for it); what only some kinds carry is there only for them."""
    if run.trigger_kind == TriggerKind.CLI:
        return {"kind": run.trigger_kind, "configuration_version": f"cv-{run.trigger_delivery}"}
    trigger: dict[str, Any] = {
        "kind": run.trigger_kind,
        "commit": run.trigger_commit,
        "delivery": run.trigger_delivery,
    }
    if run.trigger_upstream_run_id is not None:
        trigger["upstream_run"] = run.trigger_upstream_run_id
    if run.trigger_pull_request is not None:
        trigger["pull_request"] = run.trigger_pull_request
    return trigger


def stack_json(stack: StackRecord, folder_path: str | None, viewer_role: str | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "id": stack.id,
        "slug": stack.slug,
        "name": stack.name,
        "folder": folder_path,
        "repository": stack.repository,
        "branch": stack.branch,
        "path": stack.path,
        "trigger": stack.trigger,
        "pull_requests": stack.pull_requests,
        "git_auth": stack.git_auth,
        "created_at": iso(stack.created_at),
    }
    if viewer_role is not None:
        # The caller's effective role on the stack: their organization role raised by folder grants.
        answer["viewer_role"] = viewer_role
    return answer


def stacks_json(
    stacks: Iterable[StackRecord], folder_paths: dict[str, str], viewer_roles: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    roles = viewer_roles or {}
    return [
        stack_json(s, folder_paths.get(s.folder_id) if s.folder_id else None, roles.get(s.id)) for s in stacks
    ]


def folder_json(folder: FolderRecord) -> dict[str, Any]:
    parent = folder.path.rsplit("/", 1)[0] if "/" in folder.path else None
    return {
        "id": folder.id,
        "path": folder.path,
        "name": folder.name,
        "parent": parent,
        "created_at": iso(folder.created_at),
    }


def resolved_json(resolved: dict[str, Resolved]) -> dict[str, Any]:
    return {name: {"value": item.value, "origin": item.origin} for name, item in resolved.items()}


def variable_json(variable: VariableRecord, value: Any) -> dict[str, Any]:
    # A sensitive value is write-only: `value` is null for it, always. Others are the JSON value
    # that was set (41, not "41").
    return {
        "name": variable.name,
        "value": None if variable.sensitive else value,
        "sensitive": variable.sensitive,
        "kind": variable.kind,
        "updated_at": iso(variable.updated_at),
    }


def approvals_json(run: RunRecord) -> dict[str, Any]:
    """How many approvals a run needs (more than one only by its approval policies), who has
    given them, and how far it is: "1 of 2"."""
    required = run.approvals_required or 1
    given = list(run.approvals or [])  # empty for a run of one approval: `approved_by` says who
    return {
        "approvals_required": required,
        "policy_approvers": run.policy_approvers,
        "approvals": given,
        "approvals_progress": approvals_text(len(given), required) if run.approvals_required else None,
    }


def run_json(details: RunDetails) -> dict[str, Any]:
    run = details.run
    summary = summary_of(run)
    commit = None
    if run.commit_sha:
        commit = {
            "sha": run.commit_sha,
            "author": run.commit_author,
            "message": run.commit_message,
            "url": run.commit_url,
        }
    settings = {}
    if run.approval_required is not None:
        settings = {
            "require_approval": {"value": run.approval_required, "origin": run.approval_required_origin},
            "confirm_destructive": {
                "value": run.confirm_destructive,
                "origin": run.confirm_destructive_origin,
            },
            "approvers": {"value": run.approvers, "origin": run.approvers_origin},
            "forbid_self_approval": {
                "value": run.forbid_self_approval,
                "origin": run.forbid_self_approval_origin,
            },
            "policies": {"value": run.policies, "origin": run.policies_origin},
        }
    started = details.started_at
    return {
        "id": run.id,
        "number": run.number,
        "stack": details.stack_slug,
        "type": run.type,
        "status": run.status,
        "created_at": iso(run.created_at),
        "created_by": details.created_by,
        "trigger": trigger_json(run),
        "proposed": run.proposed,
        "updated_at": iso(run.updated_at),
        "started_at": iso(started),
        "finished_at": iso(run.finished_at),
        "ended_by": run.ended_by,
        "duration_ms": duration_ms(started, run.finished_at),
        "queue_position": details.queue_position,
        "waiting_for": details.waiting_for,
        "commit": commit,
        "steps": [
            {
                "name": s.name,
                "status": s.status,
                "started_at": iso(s.started_at),
                "finished_at": iso(s.finished_at),
                "duration_ms": duration_ms(s.started_at, s.finished_at),
            }
            for s in details.steps
        ],
        "summary": summary.as_dict() if run.has_plan else None,
        "summary_text": summary.text if run.has_plan else None,
        "output_changes": run.summary_outputs if run.has_plan else None,
        "drift_base_run": run.drift_base_run_id,
        "approval": {
            "required": run.approval_required,
            "confirm_destructive": run.confirm_destructive,
            "approvers": run.approvers,
            "forbid_self_approval": run.forbid_self_approval,
            "approved_by": details.approved_by,
            "approved_at": iso(run.approved_at),
            "acknowledged": list(run.acknowledged or []),
            **approvals_json(run),
        },
        "comment": run.comment,
        "policy_checks": list(run.policy_checks) if run.policy_checks is not None else None,
        "configuration": {
            "config_yaml": run.config_yaml,
            "engine": run.engine,
            "settings": settings,
            "variables": [
                {
                    "name": v["name"],
                    "origin": v["origin"],
                    "sensitive": v["sensitive"],
                    "kind": v.get("kind", "terraform"),
                }
                for v in run.variables_used or []
            ],
        },
        "state_backends": list(run.state_backends or []),
        "error": run.error,
        "failed_resources": {
            "count": run.failed_resource_count,
            "addresses": list(run.failed_resource_addresses or []),
        },
    }


# Changes: the document is assembled as text --------------------------------------------------------
#
# A plan may hold tens of thousands of changes with their attributes. The read layer hands over
# the stored JSON of each change's attributes, stages and replacement reasons as text, and it is
# spliced into the document as it is: nothing is parsed and serialized again.

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _change_text(record: ChangeRecord) -> str:
    head = (
        f'{{"address":{_dumps(record.address)},"type":{_dumps(record.type)},"unit":{_dumps(record.unit)},'
        f'"action":{_dumps(record.action)},"attributes":{record.attributes_json},'
        f'"state":{_dumps(record.state)},"error":{_dumps(record.error)}'
    )
    if record.action == "replace":
        return f'{head},"replaced_because":{record.replaced_because_json},"stages":{record.stages_json}}}'
    return head + "}"


def output_change_json(record: OutputChangeRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "unit": record.unit,
        "action": record.action,
        "before": record.before,
        "after": record.after,
        "sensitive": record.sensitive,
    }


def changes_document(
    run: RunRecord, records: Iterable[ChangeRecord], outputs: Iterable[OutputChangeRecord] = ()
) -> bytes:
    """The Changes of docs/rest-api.md: every change, grouped in the documented order, then the
    outputs the plan changes."""
    summary = summary_of(run)
    grouped: dict[str, list[str]] = {action: [] for action, _ in GROUPS}
    for record in records:
        grouped[record.action].append(_change_text(record))
    groups = ",".join(
        f'{{"action":"{action}","title":{_dumps(title)},"count":{len(grouped[action])},'
        f'"changes":[{",".join(grouped[action])}]}}'
        for action, title in GROUPS
    )
    head = _dumps({"summary": summary.as_dict(), "summary_text": summary.text})
    shown = _dumps([output_change_json(o) for o in outputs])
    return f'{head[:-1]},"groups":[{groups}],"outputs":{shown}}}'.encode()
