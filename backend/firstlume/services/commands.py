"""What people ask the services to do, as typed commands.

The API layers build these (REST from a JSON body, GraphQL from its arguments) through
api/validation.py, which words a refusal for a person and names the field; the services receive
only valid commands. Pydantic rather than msgspec: the settings (pydantic-settings), these
commands and the pub/sub events share one way of declaring a shape, Strawberry can map its
inputs onto pydantic models, and pydantic's errors carry each failing field's location, which
the 422 `field` needs. Its speed is not a concern at these sizes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Self
from urllib.parse import urlsplit

from croniter import croniter
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from firstlume.domain.effects import Notification
from firstlume.domain.git import ForkPolicy, PullRequestMode, StackTrigger
from firstlume.domain.inheritance import SETTING_NAMES, VariableKind
from firstlume.domain.policies import PolicyKind
from firstlume.domain.pull_requests import HostKind
from firstlume.domain.runs import RunType

SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
PATH_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
GROUP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


@dataclass(frozen=True)
class Expect:
    """What a field must be, in words, for refusals: "'<field>' must be <what>"."""

    what: str


def shown(value: Any) -> str:
    """A refused value as a message quotes it: whole when short, never a megabyte of it."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def refuse(message: str) -> PydanticCustomError:
    """A refusal whose message is already the whole sentence for a person."""
    return PydanticCustomError("firstlume", message)


def _slug(value: str, info: ValidationInfo) -> str:
    if not SLUG.match(value):
        raise refuse(
            f"'{info.field_name}' must be lowercase letters, digits and dashes (1 to 63 characters), "
            f"starting and ending with a letter or digit; got {shown(value)}."
        )
    return value


def _not_blank(value: str, info: ValidationInfo) -> str:
    if not value.strip():
        raise refuse(f"'{info.field_name}' must not be empty.")
    return value


def _folder_path(value: str, info: ValidationInfo) -> str:
    segments = value.strip("/").split("/")
    if not value.strip("/") or not all(PATH_SEGMENT.match(s) and s not in (".", "..") for s in segments):
        raise refuse(
            f"'{info.field_name}' must be a folder path such as \"prod/eu\" (letters, digits, '-', '_', '.'); got {shown(value)}."
        )
    return "/".join(segments)


def _relative_path(value: str, info: ValidationInfo) -> str:
    parts = [p for p in value.strip().split("/") if p not in ("", ".")]
    if value.startswith("/") or any(p == ".." for p in parts):
        raise refuse(
            f"'{info.field_name}' must be a path inside the repository, such as \"infra/net\"; got {shown(value)}."
        )
    return "/".join(parts) or "."


def _repository(value: str, info: ValidationInfo) -> str:
    """A password in the URL would be stored and shown as the URL is: refused, never echoed."""
    try:
        password = urlsplit(value.strip()).password
    except ValueError:
        password = None
    if password is not None:
        raise refuse(
            f"'{info.field_name}' must not hold a password (https://user:password@…): give the token "
            "or password as 'git_https_token', which is stored sealed and never shown."
        )
    return value


def _api_url(value: str, info: ValidationInfo) -> str:
    """An http(s) URL without credentials: the token is its own field, stored sealed."""
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise refuse(f"'{info.field_name}' must be the host's REST API URL, such as https://api.github.com.")
    if parts.password is not None or parts.username is not None:
        raise refuse(f"'{info.field_name}' must not hold credentials: give the token as 'token'.")
    return value.strip()


def _variable_name(value: str, info: ValidationInfo) -> str:
    if not VARIABLE_NAME.match(value):
        raise refuse(
            f"Variable name {shown(value)} must start with a letter or '_' and hold only letters, digits and '_'."
        )
    return value


# A full commit SHA: SHA-1 (40) or SHA-256 (64) object names, lowercase hex as git prints them.
COMMIT_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _commit_sha(value: str, info: ValidationInfo) -> str:
    if not COMMIT_SHA.fullmatch(value):
        raise refuse(
            f"'{info.field_name}' must be a full commit SHA (40 lowercase hexadecimal characters); got {shown(value)}."
        )
    return value


def _once_each(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _cron(value: str, info: ValidationInfo) -> str:
    text = " ".join(value.split())
    if len(text.split(" ")) != 5 or not croniter.is_valid(text):
        raise refuse(
            f"'{info.field_name}' must be a cron schedule of five fields (minute hour day month weekday, "
            f'in UTC), such as "0 6 * * *"; got {shown(value)}.'
        )
    return text


def _principals(values: list[str], info: ValidationInfo) -> list[str]:
    for value in values:
        kind, _, name = value.partition(":")
        valid = (kind == "user" and "@" in name and not name.startswith("@") and not name.endswith("@")) or (
            kind == "group" and GROUP_NAME.match(name) is not None
        )
        if not valid:
            raise refuse(
                f'Each of \'{info.field_name}\' must be "user:<email>" or "group:<name>"; got {shown(value)}.'
            )
    return list(dict.fromkeys(values))


# Given as a domain enum's string value (or the enum itself): the one place types are not strict.
LAX = Field(strict=False)
NonBlank = Annotated[str, AfterValidator(_not_blank)]
Slug = Annotated[str, AfterValidator(_slug)]
FolderPath = Annotated[
    str, Field(max_length=1000), AfterValidator(_folder_path), Expect('a folder path such as "prod/eu"')
]
RelativePath = Annotated[str, Field(max_length=1000), AfterValidator(_relative_path)]
VariableName = Annotated[str, AfterValidator(_variable_name)]
CronSchedule = Annotated[
    str, Field(max_length=200), AfterValidator(_cron), Expect('a cron schedule such as "0 6 * * *"')
]
Principals = Annotated[
    list[Annotated[str, Field(max_length=400)]],
    Field(max_length=200),
    AfterValidator(_principals),
    Expect('a list of "user:<email>" and "group:<name>"'),
]


def _policy_name(value: str, info: ValidationInfo) -> str:
    if not GROUP_NAME.match(value):
        raise refuse(
            f"'{info.field_name}' must be a policy name: letters, digits, '_', '.' and '-', starting with a "
            f"letter or digit, at most 100 characters; got {shown(value)}."
        )
    return value


def _policy_names(values: list[str], info: ValidationInfo) -> list[str]:
    for value in values:
        _policy_name(value, info)
    return list(dict.fromkeys(values))


PolicyName = Annotated[str, Field(max_length=100), AfterValidator(_policy_name)]
PolicyNames = Annotated[
    list[Annotated[str, Field(max_length=100)]],
    Field(max_length=50),
    AfterValidator(_policy_names),
    Expect("a list of policy names"),
]
# A Rego module; 256 KiB is far beyond any policy a person writes.
RegoModule = Annotated[str, Field(max_length=256 * 1024), AfterValidator(_not_blank)]


class Command(BaseModel):
    """Unknown fields are refused; types are not coerced ("yes" is not true, 5 is not "5")."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    # For refusals of unknown fields: who takes what.
    noun: ClassVar[str] = "this request"
    unknown_field: ClassVar[str] = "Unknown field '{field}'; {noun} takes {fields}."


class StartRun(Command):
    noun = "a run"
    type: Annotated[RunType, LAX]
    # The commit to plan instead of the branch's tip (Retry: the same commit again).
    commit: Annotated[str, AfterValidator(_commit_sha)] | None = None


# The longest comment an approval or a discard takes: a few sentences, a ticket link; beyond
# that it belongs in the ticket, and notifications (Slack) carry it whole.
MAX_RUN_COMMENT = 2000


def _comment(value: str) -> str | None:
    """A comment as stored: trimmed; a blank one is no comment."""
    return value.strip() or None


RunComment = Annotated[
    str,
    Field(max_length=MAX_RUN_COMMENT),
    AfterValidator(_comment),
    Expect(f"a comment of at most {MAX_RUN_COMMENT:,} characters"),
]


class ApproveRun(Command):
    noun = "approval"
    # Addresses of the deleted or replaced resources the approver confirms (confirm_destructive).
    acknowledged: Annotated[
        list[str], AfterValidator(_once_each), Expect("a list of resource addresses (strings)")
    ] = []
    # Why it is approved, in the approver's words: on the run, its notifications and the audit.
    comment: RunComment | None = None


class DiscardRun(Command):
    noun = "discarding a run"
    comment: RunComment | None = None


class CancelRun(Command):
    noun = "canceling a run"


class CreateStack(Command):
    noun = "a stack"
    slug: Slug
    repository: Annotated[NonBlank, Field(max_length=2000), AfterValidator(_repository)]
    # Absent or null: the slug, "main", the repository's root.
    name: Annotated[NonBlank, Field(max_length=200)] | None = None
    folder: FolderPath | None = None
    branch: Annotated[NonBlank, Field(max_length=255)] | None = None
    path: RelativePath | None = None
    # Write-only credentials, stored sealed.
    git_https_token: Annotated[NonBlank, Field(max_length=2000)] | None = None
    git_ssh_key: Annotated[NonBlank, Field(max_length=20000)] | None = None
    # What a new commit on the branch starts: manual (nothing), plan or apply.
    trigger: Annotated[StackTrigger, LAX] | None = None
    # What a pull request against the branch starts: off (nothing) or plan (a proposed run).
    pull_requests: Annotated[PullRequestMode, LAX] | None = None


class UpdateStack(Command):
    """Only the fields given change. `slug` renames the stack, `folder` moves it (null: to the
    top level; missing folders are created); a credential given replaces the stored one (its
    rotation), null removes it."""

    noun = "a stack update"
    slug: Slug | None = None
    name: Annotated[NonBlank, Field(max_length=200)] | None = None
    folder: FolderPath | None = None
    repository: Annotated[NonBlank, Field(max_length=2000)] | None = None
    branch: Annotated[NonBlank, Field(max_length=255)] | None = None
    path: RelativePath | None = None
    trigger: Annotated[StackTrigger, LAX] | None = None
    pull_requests: Annotated[PullRequestMode, LAX] | None = None
    git_https_token: Annotated[NonBlank, Field(max_length=2000)] | None = None
    git_ssh_key: Annotated[NonBlank, Field(max_length=20000)] | None = None

    # The fields null takes away (the others cannot be null).
    NULLABLE: ClassVar[frozenset[str]] = frozenset({"folder", "git_https_token", "git_ssh_key"})
    CREDENTIALS: ClassVar[tuple[str, ...]] = ("git_https_token", "git_ssh_key")

    @field_validator("name", "repository", "branch", "path", "trigger", "pull_requests")
    @classmethod
    def _not_null(cls, value: Any, info: ValidationInfo) -> Any:
        # Runs only for fields given: a refusal here names its field (the 422's `field`).
        if value is None:
            raise refuse(f"'{info.field_name}' cannot be null; leave it out to keep the current value.")
        return value

    @model_validator(mode="after")
    def _some(self) -> Self:
        if not self.model_fields_set:
            raise refuse(
                "Send at least one of slug, name, folder, repository, branch, path, trigger, "
                "pull_requests, git_https_token, git_ssh_key."
            )
        for name in self.model_fields_set - self.NULLABLE:
            if getattr(self, name) is None:
                raise refuse(f"'{name}' cannot be null; leave it out to keep the current value.")
        return self


class DeleteStack(Command):
    noun = "deleting a stack"
    # Deletes it although a run is waiting (canceled or discarded) or its state holds resources.
    force: bool = False


class MoveFolder(Command):
    """The folder's new path: a new last segment renames it, a new parent moves it (with what it
    holds); missing parents are created."""

    noun = "a folder update"
    path: FolderPath


class RotateWebhookSecret(Command):
    noun = "rotating the webhook secret"


class PutGitHost(Command):
    """Where a Git host's REST API is, and the token Firstlume sends statuses and comments with."""

    noun = "a Git host"
    kind: Annotated[HostKind, LAX]
    api_url: Annotated[NonBlank, Field(max_length=2000), AfterValidator(_api_url)]
    token: Annotated[NonBlank, Field(max_length=2000)]


class CreateFolder(Command):
    noun = "a folder"
    path: FolderPath


class PatchSettings(Command):
    """Only the settings given change; null removes the level's value, so it inherits again."""

    noun = "settings"
    unknown_field = "Unknown setting '{field}'; the settings are {fields}."
    require_approval: bool | None = None
    confirm_destructive: bool | None = None
    drift_schedule: CronSchedule | None = None
    approvers: Principals | None = None
    forbid_self_approval: bool | None = None
    policies: PolicyNames | None = None
    pull_requests_from_forks: Annotated[ForkPolicy, LAX] | None = None

    @model_validator(mode="after")
    def _some(self) -> Self:
        if not self.model_fields_set:
            raise refuse(f"Send at least one of {', '.join(SETTING_NAMES)}.")
        return self

    def changes(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in SETTING_NAMES if name in self.model_fields_set}


class PutVariable(Command):
    noun = "a variable"
    name: VariableName
    # Before `value`, whose check reads it.
    kind: Annotated[VariableKind, LAX] = VariableKind.TERRAFORM
    sensitive: bool = False
    # Non-strings are kept as JSON text, which Terraform reads as the matching type.
    value: Annotated[Any, Expect("a string, number, boolean, list or object")]

    @field_validator("value")
    @classmethod
    def _json_value(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str | int | float | bool | list | dict):
            raise PydanticCustomError("json_value", "not a JSON value")
        if info.data.get("kind") is VariableKind.ENV and not isinstance(value, str):
            raise refuse("An env variable's 'value' must be a string.")
        return value

    def value_text(self) -> str:
        return self.value if isinstance(self.value, str) else json.dumps(self.value)


# Notifications (platform-api.md, section 4) ----------------------------------------------------


class NotificationFormat(StrEnum):
    """How a delivery's body is shaped: Firstlume's JSON, or a Slack incoming-webhook message."""

    JSON = "json"
    SLACK = "slack"


def _webhook_url(value: str, info: ValidationInfo) -> str:
    parsed = urlsplit(value.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise refuse(
            f"'{info.field_name}' must be an http:// or https:// URL with a host, such as "
            f'"https://hooks.example.com/firstlume"; got {shown(value)}.'
        )
    if parsed.username or parsed.password:
        raise refuse(f"'{info.field_name}' must not hold a user name or password; send a 'secret' instead.")
    return value.strip()


def _events(values: list[Notification]) -> list[Notification]:
    if not values:
        raise refuse("'events' must name at least one event.")
    return list(dict.fromkeys(values))


WebhookUrl = Annotated[
    str, Field(max_length=2000), AfterValidator(_webhook_url), Expect("an http:// or https:// URL")
]
EventNames = Annotated[
    list[Annotated[Notification, LAX]],
    Field(max_length=20),
    AfterValidator(_events),
    Expect("a list of event names: " + ", ".join(n.value for n in Notification)),
]
Secret = Annotated[NonBlank, Field(max_length=500)]


class CreateNotification(Command):
    noun = "a notification destination"
    name: Annotated[NonBlank, Field(max_length=200)]
    url: WebhookUrl
    events: EventNames
    format: Annotated[NotificationFormat, LAX] = NotificationFormat.JSON
    # At most one: the destination then hears only of that folder's (or stack's) runs.
    folder: FolderPath | None = None
    stack: Slug | None = None
    # Write-only: signs each JSON body (X-Firstlume-Signature); stored sealed.
    secret: Secret | None = None

    @model_validator(mode="after")
    def _one_scope(self) -> Self:
        if self.folder is not None and self.stack is not None:
            raise refuse("Give 'folder' or 'stack', not both: a destination has one scope.")
        return self


class PatchNotification(Command):
    """Only the fields given change; `secret: null` removes the secret."""

    noun = "a notification destination"
    name: Annotated[NonBlank, Field(max_length=200)] | None = None
    url: WebhookUrl | None = None
    events: EventNames | None = None
    format: Annotated[NotificationFormat, LAX] | None = None
    secret: Secret | None = None

    @field_validator("name", "url", "events", "format")
    @classmethod
    def _not_null(cls, value: Any, info: ValidationInfo) -> Any:
        # Runs only for fields given (`secret: null` is allowed): the refusal names its field.
        if value is None:
            raise refuse(f"'{info.field_name}' cannot be null; leave it out to keep the current value.")
        return value

    @model_validator(mode="after")
    def _some(self) -> Self:
        if not self.model_fields_set:
            raise refuse("Send at least one of name, url, events, format, secret.")
        return self


# Stack dependencies (adoption-api.md, section 9) -------------------------------------------------


def _output_mapping(values: dict[str, str], info: ValidationInfo) -> dict[str, str]:
    if not values:
        raise refuse("'outputs' must map at least one output of the upstream stack to a variable.")
    for output, variable in values.items():
        if not VARIABLE_NAME.match(output) or not VARIABLE_NAME.match(variable):
            raise refuse(
                "'outputs' maps output names to Terraform variable names (letters, digits and '_', "
                f"not starting with a digit); got {shown(output)}: {shown(variable)}."
            )
    if len(set(values.values())) != len(values):
        raise refuse("'outputs' gives one variable two values: each variable may be read from one output.")
    return values


class Dependency(Command):
    noun = "a dependency"
    stack: Slug
    # Upstream output name → the Terraform variable of this stack that receives its value.
    outputs: Annotated[
        dict[str, str],
        Field(max_length=100),
        AfterValidator(_output_mapping),
        Expect('an object of output names to variable names, such as {"vpc_id": "vpc_id"}'),
    ]


class SetDependencies(Command):
    """The stack's whole list of upstream stacks: what is not listed is no longer read."""

    noun = "dependencies"
    depends_on: Annotated[
        list[Dependency],
        Field(max_length=100),
        Expect('a list of {"stack": "<slug>", "outputs": {"<output>": "<variable>"}} objects'),
    ]

    @field_validator("depends_on", mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        # The general refusals name only the top-level field: each item is worded here.
        if not isinstance(value, list):
            return value
        for position, item in enumerate(value):
            where = f"'depends_on' item {position}"
            if not isinstance(item, dict):
                raise refuse(
                    f'{where} must be an object such as {{"stack": "network", "outputs": {{"vpc_id": "vpc_id"}}}}.'
                )
            unknown = sorted(set(item) - {"stack", "outputs"})
            if unknown:
                raise refuse(
                    f"{where} has unknown field '{unknown[0]}'; a dependency takes stack and outputs."
                )
            for name in ("stack", "outputs"):
                if name not in item:
                    raise refuse(f"{where} needs '{name}'.")
            outputs = item["outputs"]
            if not isinstance(outputs, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in outputs.items()
            ):
                raise refuse(
                    f"{where}: 'outputs' must map output names to variable names (strings), "
                    'such as {"vpc_id": "vpc_id"}.'
                )
        return value

    @field_validator("depends_on")
    @classmethod
    def _once_each_stack(cls, value: list[Dependency]) -> list[Dependency]:
        seen: set[str] = set()
        for dependency in value:
            if dependency.stack in seen:
                raise refuse(f"Stack '{dependency.stack}' is listed twice; list each upstream stack once.")
            seen.add(dependency.stack)
        variables = [v for d in value for v in d.outputs.values()]
        if len(set(variables)) != len(variables):
            raise refuse(
                "Two dependencies give the same variable: each variable may be read from one output."
            )
        return value


class CreatePolicy(Command):
    noun = "a policy"
    name: PolicyName
    kind: Annotated[PolicyKind, LAX]
    rego: RegoModule
    description: Annotated[str, Field(max_length=2000)] = ""


class UpdatePolicy(Command):
    """Only the fields given change; the kind stays what it was created as."""

    noun = "a policy"
    rego: RegoModule | None = None
    description: Annotated[str, Field(max_length=2000)] | None = None

    @model_validator(mode="after")
    def _some(self) -> Self:
        if not self.model_fields_set:
            raise refuse("Send at least one of rego, description.")
        if "rego" in self.model_fields_set and self.rego is None:
            raise refuse("'rego' cannot be null; leave it out to keep the current module.")
        return self


class TryPolicy(Command):
    """Evaluates a policy for its author: against `input` as given, or against a past run's."""

    noun = "a policy test"
    input: dict[str, Any] | None = None
    run: Annotated[str, Field(max_length=64)] | None = None

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.input is None) == (self.run is None):
            raise refuse("Send either 'input' (the input document) or 'run' (the id of a run with a plan).")
        return self
