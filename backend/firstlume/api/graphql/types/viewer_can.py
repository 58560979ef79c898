"""`viewerCan` on the organization, a folder and a stack: what the caller may do there, as the
permission table decides it (services/access/viewer_actions.py). The UI shows a control only
when its action is allowed, instead of letting people click and be refused."""

from __future__ import annotations

import asyncio
from typing import Any

import strawberry

from firstlume.api.graphql.access import callers_grants
from firstlume.api.graphql.loaders import Loaders
from firstlume.services.access.folder_grants import Caller
from firstlume.services.access.viewer_actions import ACTIONS, allowed


@strawberry.type(
    description="What the caller may do here: each field is true when the permission table lets the "
    "caller's role here (folder grants included, for the stack-scoped actions) do it. Approving a given "
    "run also depends on the run's approvers: see Run.approval.viewerCanApprove."
)
class ViewerPermissions:
    role: str | None = strawberry.field(
        description="The caller's effective role here: reader, operator or admin (null: not a member)."
    )
    start_run: bool
    approve_run: bool
    discard_run: bool
    cancel_run: bool
    create_stack: bool
    create_folder: bool
    update_stack: bool
    delete_stack: bool
    move_folder: bool
    delete_folder: bool
    update_settings: bool
    set_variable: bool
    force_unlock: bool
    set_member: bool
    manage_notifications: bool
    manage_policies: bool
    set_folder_grants: bool
    set_stack_dependencies: bool
    rotate_webhook_secret: bool
    read_state: bool
    read_audit: bool


# The type's fields and the actions are the same names: a new action without its field fails here.
assert set(ViewerPermissions.__annotations__) - {"role"} == set(ACTIONS), "ViewerPermissions ≠ ACTIONS"


async def _caller(loaders: Loaders, org_id: str, info: strawberry.Info[Any, None]) -> Caller | None:
    # Read once per operation and organization, shared with Stack.viewerRole.
    pending = loaders.viewer_grants.get(org_id)
    if pending is None:
        actor = info.context.require_actor()
        pending = loaders.viewer_grants[org_id] = asyncio.ensure_future(
            callers_grants(loaders.reads, org_id, actor)
        )
    return await pending


async def viewer_can(
    loaders: Loaders, org_id: str, folder: str | None, info: strawberry.Info[Any, None]
) -> ViewerPermissions:
    """What the caller may do on a stack in `folder` (None: top level, or the organization)."""
    decided = allowed(await _caller(loaders, org_id, info), folder)
    return ViewerPermissions(role=decided.role, **decided.actions)
