"""What the caller may do here, so that the UI shows only the controls that work. Each action is
an entry of THE permission table (permissions.GRAPHQL), allowed when the caller's role here
allows what the table says the entry needs: the table the guard enforces, read with the role the
guard reads (the organization role; for stack-scoped actions, that role raised by the folder
grants reaching the stack or folder). No rule is written twice: change the table, and both the
refusal and what the UI offers follow.

Approving one given run also depends on the run's approvers and self-approval rules: that is the
run's own `approval.viewerCanApprove` (services/access/approvers.py), not this."""

from __future__ import annotations

from dataclasses import dataclass

from firstlume.domain.sso import effective_role
from firstlume.services.access.folder_grants import Caller
from firstlume.services.access.permissions import GRAPHQL, STACK_SCOPED_GRAPHQL
from firstlume.services.access.roles import Role

# Each action the UI offers, by the permission-table entry that decides it.
ACTIONS: dict[str, str] = {
    "start_run": "Mutation.startRun",
    "approve_run": "Mutation.approveRun",
    "discard_run": "Mutation.discardRun",
    "cancel_run": "Mutation.cancelRun",
    "create_stack": "Mutation.createStack",
    "create_folder": "Mutation.createFolder",
    "update_stack": "Mutation.updateStack",
    "delete_stack": "Mutation.deleteStack",
    "move_folder": "Mutation.moveFolder",
    "delete_folder": "Mutation.deleteFolder",
    "update_settings": "Mutation.updateSettings",
    "set_variable": "Mutation.setVariable",
    "force_unlock": "Mutation.forceUnlock",
    "set_member": "Mutation.setMember",
    "manage_notifications": "Mutation.updateNotification",
    "manage_policies": "Mutation.updatePolicy",
    "set_folder_grants": "Mutation.setFolderGrants",
    "set_stack_dependencies": "Mutation.setStackDependencies",
    "rotate_webhook_secret": "Mutation.rotateWebhookSecret",
    "read_state": "StackState.outputs",
    "read_audit": "Organization.audit",
}


@dataclass(frozen=True)
class Allowed:
    """The caller's role here (stack-scoped actions read it) and each action's answer."""

    role: str | None
    actions: dict[str, bool]


def allowed(caller: Caller | None, folder: str | None) -> Allowed:
    """What `caller` (read with folder_grants.caller_in; None: not a member) may do on a stack in
    `folder` (or, for a folder, in that folder; None: the top level or the organization)."""
    if caller is None:
        return Allowed(None, dict.fromkeys(ACTIONS, False))
    here = effective_role(caller.role, caller.grants, folder)
    actions = {}
    for action, key in ACTIONS.items():
        need = GRAPHQL[key]
        role = here if key in STACK_SCOPED_GRAPHQL else caller.role
        actions[action] = isinstance(need, Role) and Role(role).allows(need)
    return Allowed(here, actions)
