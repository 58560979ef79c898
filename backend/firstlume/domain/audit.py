"""The audit trail's vocabulary: what a recorded change is called, and what never goes into one.

Adding an audited action (for any module):
1. add a member below, named `<noun>.<verb>` (it is also the `action` filter's value and the
   name docs/rest-api.md lists);
2. in the service function that makes the change, in the same session, call
   `await audit.record(session, AuditAction.X, target="<kind>:<name>", details={...})`
   (services/audit.py). The actor, the API it came through and the request id are filled in;
   the row commits or rolls back with the change, so a refused request leaves none.
3. Put names in `details`, never values of variables or secrets: keys listed in SECRET_KEYS are
   refused by `record` (a bug, not an input error).
"""

from __future__ import annotations

from enum import StrEnum


class AuditAction(StrEnum):
    ORGANIZATION_CREATE = "organization.create"

    RUN_START = "run.start"
    RUN_APPROVE = "run.approve"
    RUN_DISCARD = "run.discard"
    RUN_CANCEL = "run.cancel"

    SETTINGS_UPDATE = "settings.update"

    VARIABLE_SET = "variable.set"
    VARIABLE_DELETE = "variable.delete"

    STACK_CREATE = "stack.create"
    STACK_UPDATE = "stack.update"
    STACK_DELETE = "stack.delete"

    FOLDER_CREATE = "folder.create"
    FOLDER_UPDATE = "folder.update"
    FOLDER_DELETE = "folder.delete"

    TOKEN_CREATE = "token.create"
    TOKEN_REVOKE = "token.revoke"

    MEMBER_UPDATE = "member.update"
    MEMBER_REMOVE = "member.remove"

    SSO_UPDATE = "sso.update"
    SESSION_START = "session.start"
    SESSION_END = "session.end"
    FOLDER_GRANTS_UPDATE = "folder.grants.update"

    WEBHOOK_SECRET_ROTATE = "git.webhook_secret.rotate"
    GIT_HOST_PUT = "git.host.put"

    NOTIFICATION_CREATE = "notification.create"
    NOTIFICATION_UPDATE = "notification.update"
    NOTIFICATION_DELETE = "notification.delete"

    POLICY_CREATE = "policy.create"
    POLICY_UPDATE = "policy.update"
    POLICY_DELETE = "policy.delete"

    STATE_WRITE = "state.write"
    STATE_FORCE_UNLOCK = "state.force_unlock"
    STATE_DELETE = "state.delete"

    DEPENDENCIES_UPDATE = "stack.dependencies.update"


class AuditVia(StrEnum):
    """Which door a change came through."""

    REST = "rest"
    GRAPHQL = "graphql"
    CLI = "cli"
    # The scheduler, a push webhook, anything no person asked for in that request.
    SYSTEM = "system"


# Who made a change no person made (the scheduler, a push), as the `actor` column reads.
SYSTEM_ACTOR = "system"

# Keys whose values are secrets or variable values: never in an audit row's details, at any depth.
SECRET_KEYS = frozenset(
    {
        "value",
        "values",
        "secret",
        "token",
        "password",
        "git_https_token",
        "git_ssh_key",
        "private_key",
    }
)


# Settings whose values are secrets: a settings.update row names them without old or new value.
# None of today's settings is one; a future secret setting is added here.
SECRET_SETTINGS: frozenset[str] = frozenset()


def secret_keys_in(details: object) -> list[str]:
    """The keys of `details` (nested dicts and lists included) that would record a secret."""
    found: list[str] = []
    if isinstance(details, dict):
        for key, item in details.items():
            if str(key).lower() in SECRET_KEYS:
                found.append(str(key))
            found += secret_keys_in(item)
    elif isinstance(details, list | tuple):
        for item in details:
            found += secret_keys_in(item)
    return found
