"""Firstlume's stacks, runs and states as the HCP Terraform API shows them. A run's status maps
onto the CLI's: it polls while a run is `pending`, streams the plan's log while it is `planning`,
asks for "yes" while it is `planned` and confirmable, and streams the apply's log after."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from firstlume.api.tfe.documents import iso, related, resource
from firstlume.domain.runs import RunStatus, RunType
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord
from firstlume.services.reads.runs import RunRecord

S = RunStatus

RUN_STATUS: dict[RunStatus, str] = {
    S.QUEUED: "pending",
    S.PLANNING: "planning",
    S.NO_CHANGES: "planned_and_finished",
    S.PLANNED: "planned_and_finished",
    S.DRIFTED: "planned_and_finished",
    S.AWAITING_APPROVAL: "planned",
    S.APPLY_QUEUED: "apply_queued",
    S.APPLYING: "applying",
    S.APPLIED: "applied",
    S.DISCARDED: "discarded",
    S.FAILED: "errored",
    S.CANCELED: "canceled",
}

PLAN_DONE = frozenset(s for s in RunStatus if s not in (S.QUEUED, S.PLANNING))
# The statuses a plan ends in (its log's last lines may still be on their way to the CLI).
PLAN_ENDS = frozenset({S.NO_CHANGES, S.PLANNED, S.DRIFTED, S.AWAITING_APPROVAL, S.APPLY_QUEUED, S.FAILED})
APPLY_DONE = frozenset({S.APPLIED, S.FAILED, S.CANCELED, S.DISCARDED, S.NO_CHANGES, S.PLANNED, S.DRIFTED})


def workspace_id(stack_id: str) -> str:
    return f"ws-{stack_id}"


def failed_in_apply(run: RunRecord) -> bool:
    return (
        run.status == S.FAILED
        and run.has_plan
        and (run.approved_at is not None or run.approval_required is False)
    )


# How long a phase that has just ended still reads as running. The CLI's log reader, after ten
# reads that brought nothing, asks whether the phase is over and stops reading if it is: a phase
# that ended between its last read and that question would lose its last lines. Within this time
# its next read (at most two seconds later) brings them, and the end of text.
SETTLING_SECONDS = 5.0


def settling(run: RunRecord) -> bool:
    return (datetime.now(UTC) - run.updated_at).total_seconds() < SETTLING_SECONDS


def plan_status(run: RunRecord, *, waits_for_approval: bool = False) -> str:
    if run.status == S.QUEUED:
        return "pending"
    if run.status == S.PLANNING or waits_for_approval or (run.status in PLAN_ENDS and settling(run)):
        # A run approved only in Firstlume: the CLI goes on reading the plan's log meanwhile.
        return "running"
    if run.status == S.CANCELED and not run.has_plan:
        return "canceled"
    if run.status == S.FAILED and not failed_in_apply(run):
        return "errored"
    return "finished"


def apply_status(run: RunRecord) -> str:
    status = RunStatus(run.status)
    if status == S.APPLY_QUEUED:
        return "queued"
    if status == S.APPLYING:
        return "running"
    if status == S.APPLIED:
        return "running" if settling(run) else "finished"
    if status == S.FAILED:
        if failed_in_apply(run):
            return "running" if settling(run) else "errored"
        return "unreachable"
    if status == S.CANCELED:
        return "canceled"
    if status in (S.DISCARDED, S.NO_CHANGES, S.PLANNED, S.DRIFTED):
        return "unreachable"
    return "pending"


def has_changes(run: RunRecord) -> bool:
    return bool(
        run.summary_create
        or run.summary_update
        or run.summary_delete
        or run.summary_replace
        or run.summary_outputs
    )


def workspace_json(org: OrganizationRecord, stack: StackRecord, *, locked: bool, current_run: str | None,
                   role: str | None, tags: list[str]) -> dict[str, Any]:  # fmt: skip
    operator = role in ("operator", "admin")
    admin = role == "admin"
    permissions = {
        "can-update": operator,
        "can-destroy": admin,
        "can-queue-run": operator,
        "can-queue-apply": operator,
        "can-queue-destroy": operator,
        "can-read-settings": True,
        "can-lock": operator,
        "can-unlock": operator,
        "can-force-unlock": admin,
        "can-read-state-versions": operator,
        "can-read-state-outputs": True,
        "can-create-state-versions": operator,
        "can-update-variable": admin,
        "can-read-variable": True,
        "can-read-run": True,
    }
    attributes = {
        "name": stack.slug,
        "description": stack.name,
        "execution-mode": "remote",
        "operations": True,
        "auto-apply": False,
        "locked": locked,
        "terraform-version": "latest",
        "working-directory": "",
        "structured-run-output-enabled": False,
        "speculative-enabled": True,
        "queue-all-runs": False,
        "file-triggers-enabled": False,
        "tag-names": tags,
        "vcs-repo": None,
        "created-at": iso(stack.created_at),
        "updated-at": iso(stack.created_at),
        "resource-count": 0,
        "permissions": permissions,
        "actions": {"is-destroyable": admin},
    }
    relationships = {
        "organization": related("organizations", org.slug),
        "current-run": related("runs", current_run),
    }
    return resource("workspaces", workspace_id(stack.id), attributes, relationships)


def run_json(run: RunRecord, *, confirmable: bool, role: str | None, message: str | None,
             auto_apply: bool) -> dict[str, Any]:  # fmt: skip
    status = RunStatus(run.status)
    operator = role in ("operator", "admin")
    attributes = {
        "status": RUN_STATUS[status],
        "has-changes": has_changes(run),
        "is-destroy": run.type == RunType.DESTROY,
        "plan-only": run.type == RunType.PLAN,
        "auto-apply": auto_apply,
        "message": message or "Queued by the Terraform CLI",
        "source": "terraform-cli",
        "refresh": True,
        "refresh-only": False,
        "created-at": iso(run.created_at),
        "position-in-queue": 0,
        "actions": {
            "is-cancelable": status in (S.QUEUED, S.APPLY_QUEUED),
            "is-confirmable": confirmable,
            "is-discardable": status == S.AWAITING_APPROVAL,
            "is-force-cancelable": False,
        },
        "permissions": {
            "can-apply": operator,
            "can-cancel": operator,
            "can-discard": operator,
            "can-force-execute": False,
            "can-force-cancel": False,
            "can-override-policy-check": False,
        },
        "status-timestamps": {},
    }
    relationships = {
        "workspace": related("workspaces", workspace_id(run.stack_id)),
        "configuration-version": related(
            "configuration-versions", f"cv-{run.trigger_delivery}" if run.trigger_delivery else None
        ),
        "plan": related("plans", f"plan-{run.id}"),
        "apply": related("applies", f"apply-{run.id}"),
        "cost-estimate": {"data": None},
        "policy-checks": {"data": []},
        "task-stages": {"data": []},
        "run-events": {"data": []},
    }
    return resource("runs", f"run-{run.id}", attributes, relationships)


def plan_json(run: RunRecord, log_url: str, *, waits_for_approval: bool = False) -> dict[str, Any]:
    attributes = {
        "status": plan_status(run, waits_for_approval=waits_for_approval),
        "has-changes": has_changes(run),
        "resource-additions": run.summary_create + run.summary_replace,
        "resource-changes": run.summary_update,
        "resource-destructions": run.summary_delete + run.summary_replace,
        "resource-imports": 0,
        "log-read-url": log_url,
    }
    return resource("plans", f"plan-{run.id}", attributes)


def apply_json(run: RunRecord, log_url: str) -> dict[str, Any]:
    attributes = {
        "status": apply_status(run),
        "resource-additions": run.summary_create + run.summary_replace,
        "resource-changes": run.summary_update,
        "resource-destructions": run.summary_delete + run.summary_replace,
        "resource-imports": 0,
        "log-read-url": log_url,
    }
    return resource("applies", f"apply-{run.id}", attributes)
