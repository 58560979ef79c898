"""The JSON shapes of spec/rest-api.md. Related rows are loaded in batches, never one per run."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Folder, ResourceChange, Run, RunStep, Stack, User, Variable
from firstlume.domain.changes import GROUPS, Summary
from firstlume.domain.inheritance import Resolved
from firstlume.services.runs import queue_positions


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def duration_ms(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None:
        return None
    return int((end - start).total_seconds() * 1000)


def run_summary(run: Run) -> Summary:
    return Summary(
        delete=run.summary_delete,
        replace=run.summary_replace,
        update=run.summary_update,
        create=run.summary_create,
    )


def stack_json(stack: Stack, folder_path: str | None) -> dict[str, Any]:
    return {
        "id": stack.id,
        "slug": stack.slug,
        "name": stack.name,
        "folder": folder_path,
        "repository": stack.repository,
        "branch": stack.branch,
        "path": stack.path,
        "git_auth": "https_token"
        if stack.git_https_token_sealed
        else "ssh_key"
        if stack.git_ssh_key_sealed
        else None,
        "created_at": iso(stack.created_at),
    }


async def stacks_json(session: AsyncSession, stacks: list[Stack]) -> list[dict[str, Any]]:
    folder_ids = {s.folder_id for s in stacks if s.folder_id}
    paths = {}
    if folder_ids:
        paths = dict(
            (await session.execute(select(Folder.id, Folder.path).where(Folder.id.in_(folder_ids)))).all()
        )
    return [stack_json(s, paths.get(s.folder_id) if s.folder_id else None) for s in stacks]


def folder_json(folder: Folder) -> dict[str, Any]:
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


def variable_json(variable: Variable, value: str | None) -> dict[str, Any]:
    # A sensitive value is write-only: `value` is null for it, always.
    return {
        "name": variable.name,
        "value": None if variable.sensitive else value,
        "sensitive": variable.sensitive,
        "kind": variable.kind,
        "updated_at": iso(variable.updated_at),
    }


async def runs_json(session: AsyncSession, runs: list[Run]) -> list[dict[str, Any]]:
    if not runs:
        return []
    run_ids = [r.id for r in runs]
    stack_slugs = dict(
        (
            await session.execute(
                select(Stack.id, Stack.slug).where(Stack.id.in_({r.stack_id for r in runs}))
            )
        ).all()
    )
    user_ids = {u for r in runs for u in (r.created_by_id, r.approved_by_id) if u}
    emails = (
        dict((await session.execute(select(User.id, User.email).where(User.id.in_(user_ids)))).all())
        if user_ids
        else {}
    )
    steps: dict[str, list[RunStep]] = {}
    for step in await session.scalars(
        select(RunStep).where(RunStep.run_id.in_(run_ids)).order_by(RunStep.position)
    ):
        steps.setdefault(step.run_id, []).append(step)
    positions = await queue_positions(session, runs)
    return [
        run_json(run, stack_slugs[run.stack_id], emails, steps.get(run.id, []), positions.get(run.id))
        for run in runs
    ]


def run_json(
    run: Run, stack_slug: str, emails: dict[str, str], steps: list[RunStep], queue_position: int | None
) -> dict[str, Any]:
    summary = run_summary(run)
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
        }
    return {
        "id": run.id,
        "number": run.number,
        "stack": stack_slug,
        "type": run.type,
        "status": run.status,
        "created_at": iso(run.created_at),
        "created_by": emails.get(run.created_by_id or ""),
        "updated_at": iso(run.updated_at),
        "finished_at": iso(run.finished_at),
        "queue_position": queue_position,
        "commit": commit,
        "steps": [
            {
                "name": s.name,
                "status": s.status,
                "started_at": iso(s.started_at),
                "finished_at": iso(s.finished_at),
                "duration_ms": duration_ms(s.started_at, s.finished_at),
            }
            for s in steps
        ],
        "summary": summary.as_dict() if run.has_plan else None,
        "summary_text": summary.text if run.has_plan else None,
        "approval": {
            "required": run.approval_required,
            "confirm_destructive": run.confirm_destructive,
            "approved_by": emails.get(run.approved_by_id or ""),
            "approved_at": iso(run.approved_at),
            "acknowledged": list(run.acknowledged or []),
        },
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


def change_json(row: ResourceChange) -> dict[str, Any]:
    item: dict[str, Any] = {
        "address": row.address,
        "type": row.type,
        "unit": row.unit,
        "action": row.action,
        "attributes": row.attributes,
        "state": row.state,
        "error": row.error,
    }
    if row.action == "replace":
        item["replaced_because"] = row.replaced_because
        item["stages"] = row.stages
    return item


def changes_json(run: Run, rows: list[ResourceChange]) -> dict[str, Any]:
    summary = run_summary(run)
    grouped: dict[str, list[dict[str, Any]]] = {action: [] for action, _ in GROUPS}
    for row in rows:
        grouped[row.action].append(change_json(row))
    return {
        "summary": summary.as_dict(),
        "summary_text": summary.text,
        "groups": [
            {"action": action, "title": title, "count": len(grouped[action]), "changes": grouped[action]}
            for action, title in GROUPS
        ],
    }
