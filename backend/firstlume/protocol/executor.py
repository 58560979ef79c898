"""The executor protocol's messages (docs/executor-protocol.md), shared by the executor, which
builds its requests and reads its answers with them, and the control plane, which validates each
request at its edge with them.

Requests refuse unknown fields (a misspelt field is an error, not silently dropped); answers
ignore them, so a newer control plane may add fields without breaking an older executor.
This module imports nothing of the server: the executor loads it at start-up.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StrictBool,
    StrictInt,
    ValidationError,
    WithJsonSchema,
    field_validator,
)

from firstlume.domain.runs import Phase, ResourceState, RunStatus, RunType, StepStatus
from firstlume.domain.runs import PhaseResult as PhaseResult  # part of the protocol: re-exported

# The most resource updates one request may carry: the executor sends fewer (see
# executor/resources.py), and the control plane refuses more with a 422 instead of holding an
# unbounded batch in one transaction.
MAX_RESOURCE_UPDATES = 5000

Engine = Literal["terraform", "tofu", "terragrunt"]
VariableKind = Literal["terraform", "env"]


def _base64_bytes(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("must be base64") from None
    return value


Base64Bytes = Annotated[
    bytes,
    BeforeValidator(_base64_bytes),
    PlainSerializer(lambda data: base64.b64encode(data).decode("ascii"), return_type=str),
    WithJsonSchema({"type": "string", "contentEncoding": "base64"}),
]


# An executor reports a step starting or ending; `pending` is the control plane's own.
REPORTED_STEP_STATUSES = tuple(s for s in StepStatus if s is not StepStatus.PENDING)


class Request(BaseModel):
    """A request body an executor sends."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Answer(BaseModel):
    """An answer the control plane sends back."""

    model_config = ConfigDict(extra="ignore", frozen=True)


# -- variables ------------------------------------------------------------------------------------


class Variable(Answer):
    """An effective variable with its value (spec and plan download; plan upload)."""

    name: str = Field(min_length=1, max_length=200, description="the variable's name")
    value: Any = Field(description="its value: any JSON for a Terraform variable, a string for env")
    sensitive: StrictBool = Field(default=False, description="masked in logs, hidden in the API")
    kind: VariableKind = Field(
        default="terraform", description="a Terraform input or an environment variable"
    )
    origin: str = Field(
        max_length=1100, description='"organization", "folder:<path>", "stack" or "config.yaml"'
    )


class VariableUse(Request):
    """A variable the plan used, without its value. A value sent here by mistake is dropped
    (never stored) rather than refused: the run goes on, and nothing secret is kept."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1, max_length=200, description="the variable's name")
    origin: str = Field(max_length=1100, description="where its value came from")
    sensitive: StrictBool = Field(default=False, description="whether its value is hidden")
    kind: VariableKind = Field(
        default="terraform", description="a Terraform input or an environment variable"
    )


# -- GET /spec --------------------------------------------------------------------------------------


class StackSource(Answer):
    slug: str = Field(description="the stack's slug")
    repository: str = Field(description="Git URL to clone")
    branch: str = Field(default="main", description="branch whose tip a plan checks out")
    path: str = Field(default=".", description="the stack's directory inside the repository")


class GitCredentials(Answer):
    https_token: str | None = Field(default=None, description="token for HTTPS clones, or null")
    ssh_private_key: str | None = Field(default=None, description="private key for SSH clones, or null")


class DriftBase(Answer):
    """What a drift run compares the infrastructure with: the stack's last successful apply."""

    run_number: StrictInt = Field(ge=1, description="the applied run's number")
    commit_sha: str = Field(description="the commit that run applied, which the drift run plans")


class ConfigurationSource(Answer):
    """Code uploaded by the Terraform CLI instead of a Git checkout: the executor downloads it
    (`GET /configuration`, a .tar.gz) and unpacks it safely."""

    kind: Literal["configuration-version"] = Field(
        default="configuration-version", description="where the code comes from"
    )
    configuration_version: str = Field(description="the configuration version's id")


class PhaseSpec(Answer):
    """What a phase needs to run, answered by `GET /spec`."""

    run_id: str = Field(description="the run's id")
    phase: Phase = Field(description="the phase this token runs")
    attempt: StrictInt = Field(ge=1, description="the phase's attempt, from 1")
    run_type: RunType = Field(description="the run's type")
    stack: StackSource = Field(description="where the code is")
    git_auth: GitCredentials = Field(default_factory=GitCredentials, description="clone credentials")
    commit_sha: str | None = Field(
        description="the plan's commit for an apply, the pushed commit for a push run's plan, the last "
        "successful apply's commit for a drift run's plan, else null (the tip of the branch)"
    )
    commit_ref: str | None = Field(
        default=None,
        description="a ref outside the branches that holds commit_sha (a pull request's head ref, "
        "refs/pull/<n>/head or refs/merge-requests/<n>/head), fetched when the commit is not on a branch",
    )
    proposed: bool = Field(
        default=False,
        description="a pull request's proposed run: the plan takes no state lock (-lock=false) and is "
        "never applied",
    )
    drift_base: DriftBase | None = Field(
        default=None, description="a drift run's plan: the apply it compares with (its commit is commit_sha)"
    )
    variables: list[Variable] = Field(default_factory=list, description="effective variables, nearest wins")
    log_offset: StrictInt = Field(default=0, ge=0, description="where this phase's log continues")
    state_path: str | None = Field(
        default=None,
        description="the stack's path under the control plane's URL, where its managed state is "
        "served (`<state_path>/state`, a Terragrunt unit's at `<state_path>/units/<unit>/state`); "
        "null: no managed state",
    )
    heartbeat_interval_seconds: float = Field(default=10.0, gt=0, description="seconds between heartbeats")
    heartbeat_timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        description="seconds without a stored heartbeat before the control plane fails the phase; also how "
        "long the executor goes on while the control plane cannot store its reports (503 "
        "`storage_unavailable`) before it stops the phase (null: it goes on)",
    )
    source: ConfigurationSource | None = Field(
        default=None,
        description="the code when it is not the stack's repository: a CLI run's uploaded configuration "
        "(null: check out the repository)",
    )
    git_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description="seconds each network step of a checkout (connect, each read) may wait (FIRSTLUME_GIT_TIMEOUT)",
    )


# -- reports ------------------------------------------------------------------------------------------


class CommitReport(Request):
    """`POST /commit`: the commit the plan phase checked out."""

    sha: str = Field(min_length=1, max_length=64, description="the commit's SHA")
    author: str = Field(max_length=500, description='"Name <email>"')
    message: str = Field(max_length=100_000, description="the whole message; the first line is kept")
    url: str | None = Field(
        default=None, max_length=2000, description="a link to the commit, when the host has one"
    )


class ConfigurationReport(Request):
    """`POST /configuration`: what the plan phase runs with."""

    config_yaml: str | None = Field(
        default=None, max_length=1_000_000, description="config.yaml as committed, or null"
    )
    engine: Engine = Field(description="the engine config.yaml chose")
    variables: list[VariableUse] = Field(default_factory=list, description="names and origins, never values")


class StepReport(Request):
    """`POST /steps`: a step starts or ends."""

    name: str = Field(min_length=1, max_length=50, description="checkout, init, plan, apply, …")
    status: Annotated[
        StepStatus, WithJsonSchema({"type": "string", "enum": [s.value for s in REPORTED_STEP_STATUSES]})
    ] = Field(description="the step starts (running) or ends (done, failed, skipped)")

    @field_validator("status")
    @classmethod
    def _reported_by_executors(cls, status: StepStatus) -> StepStatus:
        if status not in REPORTED_STEP_STATUSES:
            raise ValueError("must be running, done, failed or skipped: pending is the control plane's own")
        return status


class LogBatch(Request):
    """`POST /logs`: text of one step, at an offset of the run's log."""

    offset: StrictInt = Field(ge=0, description="offset of the first character in the run's log")
    step: str = Field(min_length=1, max_length=50, description="the step the text belongs to")
    text: str = Field(max_length=5_000_000, description="the text, masked")


class LogAccepted(Answer):
    next_offset: StrictInt = Field(ge=0, description="the end of the stored log")


class StateBackend(Request):
    unit: str = Field(min_length=1, max_length=1000, description='"." or a Terragrunt unit\'s path')
    backend: str = Field(min_length=1, max_length=100, description='the backend type, e.g. "s3" or "local"')


class StateBackendsReport(Request):
    """`POST /state-backends`: the backend each unit's init configured."""

    backends: list[StateBackend] = Field(description="one per unit")


# -- reports sent together ------------------------------------------------------------------------
# The reports above that need no answer, each tagged with its `kind`, for `POST /reports`: an
# executor sends what it has to report at once in one request instead of one request each.


class StepEntry(StepReport):
    kind: Literal["step"] = Field(description="`POST /steps`")


class CommitEntry(CommitReport):
    kind: Literal["commit"] = Field(description="`POST /commit`")


class ConfigurationEntry(ConfigurationReport):
    kind: Literal["configuration"] = Field(description="`POST /configuration`")


class StateBackendsEntry(StateBackendsReport):
    kind: Literal["state_backends"] = Field(description="`POST /state-backends`")


Report = Annotated[
    StepEntry | CommitEntry | ConfigurationEntry | StateBackendsEntry, Field(discriminator="kind")
]
REPORT_KINDS = ("step", "commit", "configuration", "state_backends")
MAX_REPORTS = 100


class ReportBatch(Request):
    """`POST /reports`: reports applied in order in one transaction, all of them or none."""

    reports: list[Report] = Field(
        min_length=1, max_length=MAX_REPORTS, description="in the order the phase made them"
    )


class PlanUpload(Request):
    """`POST /plan`: the plan phase's artifacts."""

    plan_file_b64: Base64Bytes = Field(
        max_length=500_000_000,
        description="the saved plan file (for Terragrunt a tar.gz of the units'), base64",
    )
    plan_json: dict[str, Any] = Field(
        description='what `show -json` printed ({"terragrunt_units": {unit: plan}} for Terragrunt)'
    )
    lock_file: str | None = Field(
        default=None, max_length=10_000_000, description=".terraform.lock.hcl, or null"
    )
    variables: list[Variable] = Field(
        default_factory=list, description="the variables the plan used, with values"
    )


class PlanSummary(Answer):
    delete: int = Field(default=0, description="resources the plan deletes")
    replace: int = Field(default=0, description="resources it replaces")
    update: int = Field(default=0, description="resources it updates in place")
    create: int = Field(default=0, description="resources it creates")
    outputs: int = Field(default=0, description="root module outputs it creates, updates or deletes")


class PlanRecorded(Answer):
    summary: PlanSummary | None = Field(
        description="counts per action; null when a retry found the plan stored"
    )
    has_changes: bool | None = Field(description="whether the plan changes anything; null as for summary")


class PlannedChange(Answer):
    address: str = Field(description="the change's address")
    action: str = Field(description="create, update, delete or replace")
    stage_order: list[str] = Field(
        default_factory=list, description="a replacement's operations in the order they will run"
    )


class PlanDownload(Answer):
    """`GET /plan`: what the apply phase applies."""

    plan_file_b64: Base64Bytes = Field(description="the saved plan file, base64")
    sha256: str = Field(
        min_length=64, max_length=64, description="hex SHA-256 of the plan file, checked before apply"
    )
    lock_file: str | None = Field(description=".terraform.lock.hcl of the plan, or null")
    variables: list[Variable] = Field(description="the variables the plan used")
    config_yaml: str | None = Field(description="config.yaml of the plan's commit, or null")
    commit_sha: str | None = Field(description="the plan's commit")
    changes: list[PlannedChange] = Field(
        default_factory=list,
        description="the changes the plan lists, in plan order, to follow during the apply",
    )


class StageReport(Request):
    action: Literal["delete", "create"] = Field(description="one of a replacement's two operations")
    state: ResourceState = Field(description="its state")


class ResourceReport(Request):
    """A planned change's state; each report carries the whole state, so a resent one is harmless."""

    address: str = Field(min_length=1, max_length=1000, description="the change's address, as in the plan")
    state: ResourceState = Field(description="pending, applying, done, failed or not_applied")
    error: str | None = Field(
        default=None, max_length=100_000, description="Terraform's error on this resource, masked"
    )
    stages: list[StageReport] = Field(
        default_factory=list, description="a replacement's stages, in the order they ran"
    )


class ResourceReports(Request):
    """`POST /resources`: a batch of resource states, applied in order (the last per address wins)."""

    updates: list[ResourceReport] = Field(
        max_length=MAX_RESOURCE_UPDATES, description="in the order they happened"
    )


class FinishReport(Request):
    """`POST /finish`: the phase's result."""

    status: PhaseResult = Field(description="succeeded or failed")
    error: str | None = Field(
        default=None,
        max_length=100_000,
        description="why the phase failed, when it failed for a reason of the run's own",
    )
    last_step: str | None = Field(
        default=None,
        min_length=1,
        max_length=50,
        description="a running step that ends with the phase (done with succeeded, failed with failed), "
        "instead of a step report of its own",
    )
    log: LogBatch | None = Field(
        default=None,
        description="the log's last text, stored before the result (as `POST /logs` would store it), "
        "instead of a log batch of its own",
    )
    resources: list[ResourceReport] = Field(
        default_factory=list,
        max_length=MAX_RESOURCE_UPDATES,
        description="apply phase: the last resource states, recorded before the result (as "
        "`POST /resources` would record them), instead of a batch of their own",
    )


class FinishAnswer(Answer):
    status: RunStatus | None = Field(
        description="the run's status after the report; null when a retry found it finished"
    )


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # under /api/v1/executor
    request: type[Request] | None
    answer: type[Answer] | None
    success: str
    notes: str = ""


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/spec", None, PhaseSpec, "200"),
    Endpoint("POST", "/heartbeat", None, None, "204"),
    Endpoint("POST", "/commit", CommitReport, None, "204", "plan phase"),
    Endpoint("POST", "/configuration", ConfigurationReport, None, "204", "plan phase (an apply's is ignored)"),
    Endpoint(
        "POST", "/steps", StepReport, None, "204",
        "409 `step_out_of_order` when ending a step that is not running, or starting a finished one",
    ),
    Endpoint(
        "POST", "/logs", LogBatch, LogAccepted, "200",
        "409 `log_gap` with `expected_offset` when `offset` is past the end",
    ),
    Endpoint("POST", "/state-backends", StateBackendsReport, None, "204"),
    Endpoint(
        "POST", "/reports", ReportBatch, None, "204",
        "the four reports above in one request; a refusal names the report (`report`, from 0) and "
        "undoes the whole batch",
    ),
    Endpoint("POST", "/plan", PlanUpload, PlanRecorded, "200", "plan phase; 409 when the run already has a plan"),
    Endpoint("GET", "/plan", None, PlanDownload, "200", "apply phase"),
    Endpoint(
        "GET", "/configuration-version", None, None, "200",
        "a CLI run's uploaded code (the spec's `source`), as a .tar.gz; 404 for a run of a repository",
    ),
    Endpoint("POST", "/resources", ResourceReports, None, "204", "apply phase"),
    Endpoint(
        "POST", "/finish", FinishReport, FinishAnswer, "200",
        "409 `step_out_of_order` when `last_step` is not running; 409 `log_gap` as `POST /logs` for "
        "`log`, 409 as `POST /resources` for `resources`; a refusal records nothing",
    ),
)  # fmt: skip


def field_path(location: tuple[int | str, ...]) -> str:
    """('updates', 3, 'state') → 'updates[3].state'."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(body)"


def describe(error: ValidationError) -> tuple[str, str]:
    """The first problem of `error` as (field path, sentence), without the offending value,
    which may be a secret."""
    first = error.errors(include_url=False, include_input=False)[0]
    location = first["loc"]
    path = field_path(
        tuple(
            part
            for index, part in enumerate(location)
            # A tagged report's kind is in the location too, after its index in the batch.
            if not _is_internal(part)
            and not (part in REPORT_KINDS and index > 0 and isinstance(location[index - 1], int))
        )
    )
    kind, message = first["type"], first["msg"]
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tag = f"{path}.{first['ctx']['discriminator'].strip(chr(39))}"
        kinds = ", ".join(REPORT_KINDS)  # the only tagged union of the protocol
        return tag, f"'{tag}' is required and must be one of: {kinds}"
    if kind == "missing":
        return path, f"'{path}' is required"
    if kind == "extra_forbidden":
        return path, f"'{path}' is not a field of this message"
    if kind == "value_error":
        return path, f"'{path}' {message.removeprefix('Value error, ')}"
    subject, _, rest = message.partition(" should ")
    if rest and subject in ("Input", "String", "List", "Dictionary", "Bytes", "Data"):
        return path, f"'{path}' should {rest}"
    return path, f"'{path}': {message}"


def _is_internal(part: int | str) -> bool:
    # Validators and tagged types add their own names to the location.
    return isinstance(part, str) and (part.startswith(("function-", "literal[")) or part in ("bytes",))
