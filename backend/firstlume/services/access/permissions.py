"""THE permission table: what every REST route (by route name) and every GraphQL root field
(`Query.x`, `Mutation.x`, `Subscription.x`, and the few nested fields that show more than their
parent) needs. The REST guard (api/rest/guard.py) and the GraphQL extension
(api/graphql/permissions.py) read only this table; handlers never check roles themselves.

Adding a route: give it a name (`Route(..., name="things.list")`, else the endpoint's function
name is its name) and add that name here with what it needs. An unlisted route makes the app
refuse to start, and tests/test_permissions.py lists every route and field missing here.
"""

from __future__ import annotations

from enum import StrEnum

from firstlume.services.access.roles import Role


class Open(StrEnum):
    """Needs that are not a role in an organization."""

    PUBLIC = "public"  # no token at all: health checks, the SPA, the 404 of unknown API paths
    SIGNED_IN = "signed_in"  # any valid token, outside any organization (list my organizations)
    EXECUTOR = "executor"  # an executor's phase token, checked by the executor routes themselves


Need = Role | Open

R, O, A = Role.READER, Role.OPERATOR, Role.ADMIN

REST: dict[str, Need] = {
    # health and the SPA
    "healthz": Open.PUBLIC,
    "readyz": Open.PUBLIC,
    # Prometheus scrapes it like a health check: counts only, no organization's names or data
    "metrics": Open.PUBLIC,
    "not_found_route": Open.PUBLIC,
    "spa": Open.PUBLIC,
    # each GraphQL field is checked by the GraphQL table below
    "graphql": Open.PUBLIC,
    "graphql.ws": Open.PUBLIC,
    # the executor's protocol: its phase token, checked by the routes (services/execution.py)
    **{
        f"executor.{name}": Open.EXECUTOR
        for name in (
            "spec",
            "heartbeat",
            "commit",
            "configuration",
            "steps",
            "reports",
            "logs",
            "state_backends",
            "upload_plan",
            "download_plan",
            "configuration_version",
            "resources",
            "finish",
        )
    },
    # the HCP Terraform API the Terraform CLI calls (api/tfe): discovery and ping are public, the
    # upload URL's secret is its own credential (the CLI sends no token there)
    "tfe.discovery": Open.PUBLIC,
    "tfe.ping": Open.PUBLIC,
    "tfe.motd": Open.PUBLIC,
    "tfe.upload": Open.PUBLIC,
    "tfe.log": Open.PUBLIC,
    "tfe.run_page": Open.PUBLIC,
    "tfe.account_details": Open.SIGNED_IN,
    **{
        f"tfe.{name}": R
        for name in (
            "organization",
            "entitlements",
            "run_queue",
            "capacity",
            "list_workspaces",
            "workspace_by_name",
            "workspace",
            "workspace_runs",
            "current_outputs",
            "cv",
            "run",
            "plan",
            "run_events",
            "apply",
        )
    },
    **{
        f"tfe.{name}": O
        for name in (
            "create_workspace",
            "create_cv",
            "create_run",
            "apply_run",
            "discard_run",
            "cancel_run",
            "lock",
            "unlock",
            "current_state",
            "state_download",
            "create_state_version",
        )
    },
    "tfe.force_unlock": A,
    # organizations, catalog, settings, variables
    "list_orgs": Open.SIGNED_IN,
    "list_stacks": R,
    "get_stack": R,
    "create_stack": A,
    "list_folders": R,
    "create_folder": A,
    "get_settings": R,
    "patch_settings": A,
    "list_variables": R,  # sensitive values are never shown to anyone
    "put_variable": A,
    "delete_variable": A,
    # runs
    "start_run": O,
    "list_stack_runs": R,
    "list_org_runs": R,
    "get_run": R,
    "get_changes": R,
    "logs": R,
    "approve": O,  # and the run's approvers (services/access/approvers.py)
    "discard": O,
    "cancel": O,
    # managed state: a person's token needs these roles; an executor's phase token keeps its own
    # checks (services/state/callers.py)
    "state.lock_status": R,
    "state.versions": R,
    "state.read": O,
    "state.write": O,
    "state.lock": O,
    "state.unlock": O,  # an UNLOCK without a body is a force-unlock: admin (api/rest/guard.py)
    "state.version": O,
    "state.outputs": O,
    "state.delete": A,
    "state.force_unlock": A,
    # members and tokens
    "members.list": R,
    "members.put": A,
    "members.delete": A,
    "tokens.list": R,  # the caller's own tokens
    "tokens.create": R,
    "tokens.revoke": R,
    # single sign-on: the way in is open (the provider vouches for the person); the session's
    # CSRF token needs the session; sign-out ends the browser's session (CSRF-checked as a write)
    "sso.config": Open.PUBLIC,
    "sso.login": Open.PUBLIC,
    "sso.callback": Open.PUBLIC,
    "sso.logout": Open.PUBLIC,
    "session.get": Open.SIGNED_IN,
    # `terraform login`: the check of its address and the token request are public (the code and
    # its PKCE verifier are the token request's credentials); any member may allow it for themself
    "cli_login.check": Open.PUBLIC,
    "cli_login.token": Open.PUBLIC,
    "cli_login.decide": R,
    "sso.get": A,
    "sso.put": A,
    "folder_grants.get": A,
    "folder_grants.put": A,
    # Git-driven runs: the webhook authenticates by the host's signature (api/rest/git_routes.py)
    "git.webhook": Open.PUBLIC,
    "git.rotate_secret": A,
    "git.deliveries": R,
    "git.hosts.put": A,
    "git.hosts.list": R,
    "pull_requests.list": R,
    "stacks.update": A,
    # deleting and moving things, and the deleted stacks kept for the retention period
    "stacks.delete": A,
    "folders.update": A,
    "folders.delete": A,
    "deleted_stacks.list": A,
    "deleted_stacks.get": A,
    "deleted_stacks.runs": A,
    "deleted_stacks.state_versions": A,
    "deleted_stacks.state_version": A,
    # drift schedules' results, and notifications (their URLs and secrets are the admins')
    # the audit trail: who changed what, the admins'
    "audit.list": A,
    "drift.overview": R,
    "drift.stack": R,
    **{
        f"notifications.{name}": A
        for name in ("list", "create", "get", "update", "delete", "deliveries", "test")
    },
    # stack dependencies (adoption-api.md, section 9): output names and variable names, no values
    "dependencies.get": R,
    "dependencies.put": A,
    "dependencies.graph": R,
    # policies as code: anyone may read them (why a run failed); changing and testing them
    # (a test reads a run's whole plan) is the admins'
    "policies.list": R,
    "policies.get": R,
    **{f"policies.{name}": A for name in ("create", "update", "delete", "test")},
}

# Actions on one stack whose role is the caller's effective role on that stack: the organization
# role raised by the grants of the stack's folder and the folders above it (folder_grants.py).
# The organization-level check of these asks only for membership; the stack's check follows
# once the stack (or the run's stack) is known.
STACK_SCOPED_REST = frozenset({"start_run", "approve", "discard", "cancel"})
STACK_SCOPED_GRAPHQL = frozenset(
    {"Mutation.startRun", "Mutation.approveRun", "Mutation.discardRun", "Mutation.cancelRun"}
)

# What an UNLOCK without a body (terraform force-unlock) needs.
FORCE_UNLOCK: Need = A

# Routes whose token may also be an executor's phase token (their own checks apply to it).
PHASE_TOKEN_ROUTES = frozenset(name for name in REST if name.startswith("state."))

GRAPHQL: dict[str, Need] = {
    "Query.viewer": Open.SIGNED_IN,
    "Query.organizations": Open.SIGNED_IN,
    "Query.organization": Open.SIGNED_IN,  # null outside the caller's organizations
    "Mutation.startRun": O,
    "Mutation.approveRun": O,
    "Mutation.discardRun": O,
    "Mutation.cancelRun": O,
    "Mutation.createFolder": A,
    "Mutation.createStack": A,
    "Mutation.updateSettings": A,
    "Mutation.setVariable": A,
    "Mutation.deleteVariable": A,
    "Mutation.forceUnlock": A,
    "Mutation.setMember": A,
    "Mutation.removeMember": A,
    "Mutation.createToken": R,
    "Mutation.revokeToken": R,
    "Mutation.updateStack": A,
    "Mutation.deleteStack": A,
    "Mutation.moveFolder": A,
    "Mutation.deleteFolder": A,
    "Mutation.rotateWebhookSecret": A,
    "Mutation.putGitHost": A,
    "Mutation.createNotification": A,
    "Mutation.updateNotification": A,
    "Mutation.deleteNotification": A,
    "Mutation.testNotification": A,
    "Mutation.setStackDependencies": A,
    "Mutation.createPolicy": A,
    "Mutation.updatePolicy": A,
    "Mutation.deletePolicy": A,
    "Mutation.testPolicy": A,
    "Subscription.runLog": R,
    "Subscription.runUpdated": R,
    "Subscription.resourceStates": R,
    "Subscription.activeRuns": R,
    "Subscription.gitDeliveries": R,
    # Nested fields that reveal more than their parent: state contents.
    "StackState.outputs": O,
    "StateVersion.state": O,
    # Notification destinations (their URLs may be secrets, as Slack's are): the admins'.
    "Organization.notifications": A,
    "Organization.audit": A,
    "Organization.deletedStacks": A,
    # Single sign-on's mapping and the folders' grants: the admins'.
    "Organization.sso": A,
    "Organization.folderGrants": A,
    "Mutation.updateSso": A,
    "Mutation.setFolderGrants": A,
}

ROOT_TYPES = ("Query", "Mutation", "Subscription")
