"""What the API layer is handed are read models, never ORM rows (services/reads/__init__.py): every
read of the read layer, and the services the routes call, on a database where each of them finds
something, answer with nothing that is an ORM object, however deep (dataclass fields, lists,
tuples, dicts). A new read function must be added here: the test fails for one it did not call."""

from __future__ import annotations

import dataclasses
import inspect
import json
import pkgutil
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from sqlalchemy import Row

import firstlume.services.reads as reads_package
from conftest import Tenant, make_stack
from firstlume.db.models import Base
from firstlume.db.models_git import GitFeedback, PullRequest
from firstlume.services import accounts, catalog, inherited, removal, runs
from firstlume.services.access import members, tokens
from firstlume.services.access.commands import CreateToken
from firstlume.services.access.permissions import Open
from firstlume.services.commands import (
    CancelRun,
    CreateFolder,
    DeleteStack,
    MoveFolder,
    PatchSettings,
    PutVariable,
    StartRun,
    UpdateStack,
)
from firstlume.services.context import Context
from firstlume.services.notifications import destinations
from firstlume.services.reads import audit as audit_reads
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads import changes as change_reads
from firstlume.services.reads import counts as count_reads
from firstlume.services.reads import drift as drift_reads
from firstlume.services.reads import git as git_reads
from firstlume.services.reads import notifications as notification_reads
from firstlume.services.reads import pull_requests as pull_request_reads
from firstlume.services.reads import runs as run_reads
from firstlume.services.reads import settings as setting_reads
from firstlume.services.reads import state as state_reads
from firstlume.services.reads import state_contents
from firstlume.services.reads import summaries as summary_reads
from firstlume.services.reads.changes import ChangeFilter, ChangePageKey
from firstlume.services.reads.runs import PageExtras, RunFilter, RunPageKey
from firstlume.services.state import locks, store
from firstlume.services.state.callers import state_caller
from support.runs import CREATE_ONE, plan_run, start


def orm_objects(value: Any, path: str = "") -> list[str]:
    """Where in `value` an ORM object (or a database row) is."""
    if isinstance(value, Base | Row):
        return [f"{path or '.'}: {type(value).__name__}"]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            found
            for field in dataclasses.fields(value)
            for found in orm_objects(getattr(value, field.name), f"{path}.{field.name}")
        ]
    if isinstance(value, dict):
        return [
            found
            for k, v in value.items()
            for found in orm_objects(k, path) + orm_objects(v, f"{path}[{k!r}]")
        ]
    if isinstance(value, list | tuple | set | frozenset):
        return [found for i, item in enumerate(value) for found in orm_objects(item, f"{path}[{i}]")]
    return []


def test_the_check_finds_orm_objects_deep_inside() -> None:
    from firstlume.db.models import Stack
    from firstlume.services.reads.drift import DriftedResource

    assert orm_objects({"a": [(1, Stack(slug="x"))]}) == ["['a'][0][1]: Stack"]
    assert orm_objects([DriftedResource("a", "create")]) == []


def read_functions() -> set[str]:
    """Every public coroutine function of the read layer's modules (but `rows`, whose helper
    hands the reads their rows)."""
    names = set()
    for info in pkgutil.iter_modules(reads_package.__path__):
        if info.name == "rows":
            continue
        module = __import__(f"{reads_package.__name__}.{info.name}", fromlist=["_"])
        for name, value in vars(module).items():
            if (
                inspect.iscoroutinefunction(value)
                and not name.startswith("_")
                and value.__module__ == module.__name__
            ):
                names.add(f"{module.__name__}.{name}")
    return names


class Answers:
    """Calls reads and services, keeping what each answered."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}

    async def __call__(self, function: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        answer = await function(*args, **kwargs)
        self.answers.setdefault(f"{function.__module__}.{function.__qualname__}", answer)
        return answer


async def test_reads_and_the_services_the_api_calls_hand_out_no_orm_object(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    o, h = f"/api/v1/orgs/{tenant.org}", tenant.headers
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo", "folder": "prod/eu"})
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///repo", "git_https_token": "t0k"})
    await make_stack(ctx, tenant, {"slug": "old", "repository": "file:///repo"})
    assert (await client.put(f"{o}/variables/region", json={"value": "eu"}, headers=h)).status_code == 200
    applied = await start(ctx, tenant.token, tenant.org, "net", "apply")
    output = {"actions": ["create"], "before": None, "after": "x", "after_unknown": False}
    assert await plan_run(ctx, {**CREATE_ONE, "output_changes": {"url": output}}) == {
        applied: "awaiting_approval"
    }
    queued = await start(ctx, tenant.token, tenant.org, "net", "plan")
    drifted = await start(ctx, tenant.token, tenant.org, "web", "drift")
    state = f"{o}/stacks/net/state"
    resources = [{"mode": "managed", "type": "t", "name": "a", "instances": [{"attributes": {}}]}]
    document = {"version": 4, "serial": 1, "lineage": "l", "outputs": {}, "resources": resources}
    assert (await client.post(state, content=json.dumps(document), headers=h)).status_code == 200
    lock = json.dumps({"ID": "lock-1", "Operation": "OperationTypeApply", "Who": "ada@laptop"})
    assert (await client.request("LOCK", f"{state}/lock", content=lock, headers=h)).status_code == 200
    assert (await client.post(f"{o}/git/webhook-secret", headers=h)).status_code == 201
    hook = await client.post(f"{o}/git/webhook", content=b"{}", headers={"X-GitHub-Event": "push"})
    assert hook.status_code >= 400
    destination = await client.post(
        f"{o}/notifications",
        json={"name": "ops", "url": "http://93.184.216.34/hook", "events": ["run.failed"], "stack": "net"},
        headers=h,
    )
    assert destination.status_code == 201, destination.text
    destination_id = destination.json()["id"]

    call = Answers()
    async with ctx.unit() as unit:
        session = unit.session
        actor, org = await call(
            accounts.authenticate_in_org, session, tenant.token, tenant.org, Open.SIGNED_IN
        )
        await call(accounts.authenticate_in_stack, session, tenant.token, tenant.org, "net", Open.SIGNED_IN)
        await call(accounts.authenticate_about, session, tenant.token, tenant.org, "net")
        await call(accounts.org_for, session, actor, tenant.org)
        await call(accounts.org_and_stack_for, session, actor, tenant.org, "net")
        await call(accounts.orgs_of, session, actor)
        net = await call(catalog.stack_by_slug, session, org, "net")
        folder = await call(catalog.folder_by_path, session, org, "prod/eu")
        await call(catalog.ensure_folder, session, org, CreateFolder(path="prod/us"))
        await call(catalog.update_stack, session, ctx.keyring, org, "web", UpdateStack(name="Web"))
        await call(catalog.move_folder, session, org, "prod/us", MoveFolder(path="prod/usa"))
        await removal.delete_folder(session, org, "prod/usa")  # answers nothing
        await call(removal.delete_stack, unit, actor, org, "old", DeleteStack())
        await call(inherited.patch_settings, session, folder, PatchSettings(require_approval=True))
        await call(inherited.put_variable, session, ctx.keyring, net, PutVariable(name="size", value="m"))
        await call(members.list_members, session, org.id)
        await call(tokens.list_tokens, session, actor)
        made = await call(tokens.create_token, session, actor, CreateToken(name="ci"), org)
        await call(tokens.revoke_token, unit, actor, made.row.id, org)
        await call(runs.start_run, unit, actor, net, StartRun(type="plan"))
        await call(runs.cancel_run, unit, actor, org, queued, CancelRun())
        await call(destinations.add_test_delivery, session, org, destination_id)
        caller = await call(state_caller, session, tenant.token, tenant.org, "net", Open.SIGNED_IN)
        await call(
            store.write_state,
            session,
            ctx.keyring,
            caller,
            ".",
            json.dumps({**document, "serial": 2}).encode(),
            "lock-1",
        )
        await call(locks.lock_state, session, caller, ".", {"ID": "lock-1"})
        # A pull request and a commit status for it, as a webhook and a proposed run leave them.
        session.add(
            PullRequest(
                id="pr1",
                org_id=org.id,
                repository="https://git.example.com/infra",
                number=7,
                url="https://git.example.com/infra/pull/7",
                title="Widen the network",
                author="grace",
                head_sha="a" * 40,
                base_branch="main",
                state="open",
                dialect="github",
            )
        )
        await session.flush()
        session.add(
            GitFeedback(
                org_id=org.id,
                pull_request_id="pr1",
                kind="status",
                run_id=applied,
                payload={"sha": "a" * 40, "state": "pending", "context": "firstlume/net"},
            )
        )

    async with ctx.db.read() as session:
        stacks = await call(catalog_reads.stacks_of_orgs, session, [org.id])
        [folders] = await call(catalog_reads.folders_of_orgs, session, [org.id])
        await call(catalog_reads.stacks_by_id, session, [net.id])
        await call(catalog_reads.folders_by_id, session, [f.id for f in folders])
        await call(catalog_reads.folder_paths, session, stacks[0])
        await call(catalog_reads.stacks_in_folders, session, [f.id for f in folders])
        await call(catalog_reads.subfolders, session, [f.id for f in folders])
        await call(catalog_reads.stack_by_slug, session, org.id, "net")
        await call(catalog_reads.folder_by_path, session, org.id, "prod/eu")
        [gone] = await call(catalog_reads.deleted_stacks, session, org.id)
        await call(catalog_reads.deleted_stack, session, org.id, gone.id)
        scopes = [org, folders[0], net]
        await call(setting_reads.effective_settings, session, scopes)
        await call(setting_reads.variables, session, scopes)
        page = await call(run_reads.stack_runs, session, [RunPageKey(net.id, 10, counted=True)], PageExtras())
        await call(run_reads.run_in_org, session, org.id, applied)
        await call(run_reads.run_with_steps, session, applied)
        await call(run_reads.run_status, session, applied)
        await call(run_reads.runs_by_id, session, [applied, drifted])
        await call(run_reads.stack_run_counts, session, [net.id], RunFilter())
        await call(run_reads.active_runs, session, [org.id])
        await call(run_reads.steps_of, session, [applied])
        await call(run_reads.emails, session, [actor.user_id])
        await call(run_reads.queue_positions, session, [r.id for r in page[0]])
        await call(run_reads.lock_holders, session, [net.id])
        await call(run_reads.details, session, page[0])
        await call(run_reads.details_in_org, session, org.id, applied)
        await call(change_reads.all_changes, session, applied)
        await call(change_reads.changes_at, session, applied, None)
        await call(change_reads.counts, session, [applied], ChangeFilter())
        await call(change_reads.facets, session, [applied])
        await call(change_reads.output_changes, session, [applied])
        await call(change_reads.state_counts, session, [applied])
        await call(pull_request_reads.pull_requests, session, org.id)
        await call(pull_request_reads.feedback, session, org.id)
        await call(state_reads.person_locks, session, [net.id])
        await call(change_reads.pages, session, [ChangePageKey(applied, 10, None, ChangeFilter())])
        [heads] = await call(state_reads.heads_of_stacks, session, [net.id])
        await call(state_reads.head_of, session, net.id, ".")
        versions = await call(state_reads.versions, session, heads[0].id, limit=10)
        serial = versions[0].serial
        await call(state_contents.version_resources, session, ctx.keyring, stacks[0][0], ".", serial)
        await call(state_contents.version_diff, session, ctx.keyring, stacks[0][0], ".", serial, serial)
        await call(summary_reads.stack_summaries, session, [net.id])
        await call(audit_reads.audit_page, session, org.id, audit_reads.AuditFilter(), 100)
        await call(drift_reads.overview, session, org.id)
        await call(drift_reads.history, session, stacks[0][1].id)
        await call(drift_reads.drifted_resources, session, [applied])
        await call(drift_reads.drifted_counts, session, [applied])
        await call(git_reads.deliveries, session, org.id)
        await call(git_reads.secret_rotated_at, session, org.id)
        [found] = await call(notification_reads.destinations, session, org.id)
        [delivered] = await call(notification_reads.deliveries, session, found.id)
        await call(notification_reads.delivery, session, delivered.id)
    await call(count_reads.runs_by_status, ctx.db)

    empty = [name for name, answer in call.answers.items() if answer in (None, [], [[]], {})]
    assert not empty, f"these found nothing to check: {empty}"
    found_orm = {name: where for name, answer in call.answers.items() if (where := orm_objects(answer))}
    assert found_orm == {}
    assert read_functions() - set(call.answers) == set()
