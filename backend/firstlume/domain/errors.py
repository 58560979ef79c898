"""Typed errors of the domain and services. The API layers map each to one response."""

from __future__ import annotations

from typing import Any


class FirstlumeError(Exception):
    """Base of every expected failure. `code` is stable; `message` is for a person."""

    code = "error"
    http_status = 400

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class NotFound(FirstlumeError):
    code = "not_found"
    http_status = 404


class Unauthenticated(FirstlumeError):
    code = "unauthenticated"
    http_status = 401


class Forbidden(FirstlumeError):
    code = "forbidden"
    http_status = 403


class InvalidRequest(FirstlumeError):
    code = "invalid_request"
    http_status = 422


class Conflict(FirstlumeError):
    code = "conflict"
    http_status = 409


class AlreadyExists(Conflict):
    code = "already_exists"


class ProposedRun(Conflict):
    """A pull request's proposed run only plans: it is never approved, discarded into an apply or
    applied."""

    code = "proposed_run"


class InvalidStatus(Conflict):
    """The run's current status forbids the request (approve or discard when not awaiting
    approval, cancel once it has started, …): one code for all of them, the status in `status`."""

    code = "invalid_status"

    def __init__(self, message: str, *, status: Any) -> None:
        super().__init__(message, status=str(status))


class AcknowledgementRequired(Conflict):
    code = "acknowledgement_required"

    def __init__(self, missing: list[str]) -> None:
        super().__init__(
            "Approval needs every deleted or replaced resource acknowledged; missing: "
            + ", ".join(missing)
            + ".",
            missing=missing,
        )
        self.missing = missing


class StackLocked(Conflict):
    code = "stack_locked"


class StackBusy(Conflict):
    """The stack's runs forbid the change: a run is active (deleting the stack), or one is in a
    running phase (renaming it: the executor addresses the stack's state by its slug)."""

    code = "stack_busy"


class StackHasResources(Conflict):
    """Deleting a stack whose managed state still holds resources (destroy them first, or force)."""

    code = "stack_has_resources"


class FolderNotEmpty(Conflict):
    code = "folder_not_empty"


class StatusChanged(Conflict):
    """A compare-and-set lost: somebody changed the run's status first."""

    code = "status_changed"


class InvalidTransition(Conflict):
    code = "invalid_transition"

    def __init__(self, current: Any, target: Any) -> None:
        super().__init__(
            f"A run cannot go from {current} to {target}.", current=str(current), target=str(target)
        )
        self.current = current
        self.target = target


# The Git webhook's refusals. They reach people over REST only (a host posts the webhook); as
# InvalidRequest kinds they would still have a typed GraphQL result, with their own code.


class InvalidSignature(InvalidRequest):
    """A webhook without the organization's signature (or GitLab token), or with a wrong one."""

    code = "invalid_signature"
    http_status = 401


class UnsupportedWebhook(InvalidRequest):
    code = "unsupported_webhook"
    http_status = 400


class InvalidPayload(InvalidRequest):
    """A signed webhook whose body is not a push payload Firstlume can read."""

    code = "invalid_payload"
    http_status = 422


class UnknownRepository(InvalidRequest):
    """A signed pull-request event of a repository that no stack of the organization uses."""

    code = "unknown_repository"
    http_status = 422


class WebhookNotJson(InvalidRequest):
    code = "invalid_json"
    http_status = 400


class PayloadTooLarge(InvalidRequest):
    code = "payload_too_large"
    http_status = 413


class StorageUnavailable(FirstlumeError):
    """The database cannot store anything now (full disk, read-only, connection gone, no
    connection free). `kind` names which (`full`, `read_only`, `gone`, `busy`); a run that failed
    of it says so in its error, starting with `reason_prefix`."""

    code = "storage_unavailable"
    http_status = 503
    # Seconds a client is asked to wait before trying again (the Retry-After header).
    retry_after = 5

    def __init__(self, message: str, *, kind: str = "full", **details: Any) -> None:
        super().__init__(message, storage=kind, **details)
        self.kind = kind

    @property
    def what(self) -> str:
        """What happened, as a clause of a run's error."""
        return {
            "read_only": "the database accepted reads only",
            "gone": "the database could not be reached",
            "busy": "the database had no free connection",
        }.get(self.kind, "the database's disk was full")

    @property
    def reason_prefix(self) -> str:
        return {
            "read_only": "storage read-only",
            "gone": "storage unavailable",
            "busy": "storage unavailable",
        }.get(self.kind, "storage full")
