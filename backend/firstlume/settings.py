"""Typed settings, read once from FIRSTLUME_* environment variables (pydantic-settings).

`Settings.from_env(environ)` reads a mapping (os.environ by default) and raises SettingsError
with one line per bad variable, naming it and what was expected. The Kubernetes launcher's
settings are nested under `settings.k8s` and read from FIRSTLUME_K8S_*. Each field documents
itself (description, the default as the README states it, the Helm value that sets it):
`firstlume settings-docs` renders the README's tables from these fields.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.sources.utils import parse_env_vars


class SettingsError(ValueError):
    pass


# -- reading from a given mapping ------------------------------------------------------------

# The mapping `from_env` reads; None: the process environment.
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("firstlume_settings_environ", default=None)


class _MappingEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source over a mapping, so tests and other code build
    settings from a dict without touching os.environ."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        environ = _ENVIRON.get()
        return parse_env_vars(
            os.environ if environ is None else environ,
            self.case_sensitive,
            self.env_ignore_empty,
            self.env_parse_none_str,
        )


class _EnvSettings(BaseSettings):
    """Init arguments first, then the environment; no .env files, no secrets directory."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _MappingEnvSource(settings_cls))

    @model_validator(mode="before")
    @classmethod
    def _blank_means_default(cls, data: Any) -> Any:
        """An unset and a blank variable are the same (the chart sets every variable, some to
        ""), except for the fields where an empty value means "none" rather than the default."""
        if not isinstance(data, dict):
            return data
        cleaned: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(value, str):
                value = value.strip()
                if not value:
                    field = cls.model_fields.get(key)
                    if field is not None and field_doc(field).get("empty_is_none"):
                        cleaned[key] = None
                    continue
            cleaned[key] = value
        return cleaned


def field_doc(field: FieldInfo) -> dict[str, Any]:
    """The metadata `doc()` gave a field."""
    extra = field.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def doc(
    *,
    default_text: str | None = None,
    helm: str | None = None,
    helm_default: str | None = None,
    secret: bool = False,
    empty_is_none: bool = False,
) -> JsonDict:
    """A field's metadata beyond its description, read by the error messages and the README's
    tables: the default as the README states it, the Helm value that sets it (and the chart's
    default where it differs), whether its value must never be echoed, and whether an empty value
    means "none" rather than the default."""
    extra: JsonDict = {}
    for key, value in (("default_text", default_text), ("helm", helm), ("helm_default", helm_default)):
        if value is not None:
            extra[key] = value
    if secret:
        extra["secret"] = True
    if empty_is_none:
        extra["empty_is_none"] = True
    return extra


# -- checks shared by the Kubernetes fields --------------------------------------------------

# Kubernetes resource quantities: 250m, 1, 0.5, 512Mi, 2Gi, 1e3 ...
_QUANTITY = re.compile(
    r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+)?$"
)
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _quantity(value: str | None) -> str | None:
    if value is not None and not _QUANTITY.match(value):
        raise ValueError(f"must be a Kubernetes quantity such as 500m, 2 or 512Mi, got {value!r}")
    return value


def _dns_label(value: str) -> str:
    if not _DNS1123_LABEL.match(value) or len(value) > 63:
        raise ValueError(
            f"must be a DNS-1123 label (lowercase letters, digits and '-', at most 63), got {value!r}"
        )
    return value


def _object_names(values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        if not _DNS1123_SUBDOMAIN.match(value) or len(value) > 253:
            raise ValueError(
                f"must hold Kubernetes object names (lowercase letters, digits, '-' and '.'), got {value!r}"
            )
    return values


def _comma_list(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _json_text(value: Any, expected: type, shape: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON: {exc.msg} at position {exc.pos}") from None
    if not isinstance(parsed, expected):
        raise ValueError(f"must be {shape}, got {type(parsed).__name__}")
    return parsed


class Toleration(BaseModel):
    """A Kubernetes toleration, in the API's field names."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)

    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(default=None, alias="tolerationSeconds")

    @model_validator(mode="after")
    def _operator_fits(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise ValueError("a toleration with operator Exists takes no value")
        if self.operator == "Equal" and not self.key:
            raise ValueError("a toleration with operator Equal needs a key")
        return self

    def manifest(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=False)


# -- the Kubernetes launcher -------------------------------------------------------------------

K8S_PREFIX = "FIRSTLUME_K8S_"


class KubernetesSettings(_EnvSettings):
    """FIRSTLUME_K8S_*: the Kubernetes launcher. Read always, needed with FIRSTLUME_LAUNCHER=kubernetes."""

    model_config = SettingsConfigDict(
        env_prefix=K8S_PREFIX, frozen=True, extra="ignore", validate_default=True
    )

    namespace: str = Field(
        default="default",
        description="namespace of the executor Jobs (it must exist)",
        json_schema_extra=doc(helm="executor.namespace", helm_default="the release's namespace"),
    )
    image: str = Field(
        default="",
        description="executor image (required with the Kubernetes launcher)",
        json_schema_extra=doc(
            default_text="none", helm="image.repository`, `image.tag", helm_default="the chart's image"
        ),
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent",
        description="pull policy of the executor image",
        json_schema_extra=doc(helm="image.pullPolicy"),
    )
    image_pull_secrets: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="comma-separated names of Secrets for pulling the image",
        json_schema_extra=doc(helm="imagePullSecrets"),
    )
    service_account: str = Field(
        default="firstlume-executor",
        description="service account of executor pods (no API token is mounted)",
        json_schema_extra=doc(helm="executor.serviceAccount.name", helm_default="`<full name>-executor`"),
    )
    cpu_request: str | None = Field(
        default="250m",
        description="CPU request of the executor, a Kubernetes quantity; empty: none",
        json_schema_extra=doc(helm="executor.resources.requests.cpu", empty_is_none=True),
    )
    cpu_limit: str | None = Field(
        default=None,
        description="CPU limit of the executor; empty: none",
        json_schema_extra=doc(helm="executor.resources.limits.cpu", empty_is_none=True),
    )
    memory_request: str | None = Field(
        default="512Mi",
        description="memory request of the executor; empty: none",
        json_schema_extra=doc(helm="executor.resources.requests.memory", empty_is_none=True),
    )
    memory_limit: str | None = Field(
        default="2Gi",
        description="memory limit of the executor (over it: out of memory); empty: none",
        json_schema_extra=doc(helm="executor.resources.limits.memory", empty_is_none=True),
    )
    work_dir_size_limit: str | None = Field(
        default="4Gi",
        description="size limit of the writable work volume (checkout, providers, plan file); empty: none",
        json_schema_extra=doc(helm="executor.workDirSizeLimit", empty_is_none=True),
    )
    active_deadline_seconds: int = Field(
        default=10800,
        ge=1,
        description="a phase that runs longer fails with `deadline exceeded` (10800: 3 hours)",
        json_schema_extra=doc(helm="executor.activeDeadlineSeconds"),
    )
    ttl_seconds_after_finished: int = Field(
        default=3600,
        ge=0,
        description="how long a finished Job stays for inspection",
        json_schema_extra=doc(helm="executor.ttlSecondsAfterFinished"),
    )
    node_selector: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description='node selector of executor pods, a JSON object: `{"pool": "runners"}`',
        json_schema_extra=doc(helm="executor.nodeSelector"),
    )
    tolerations: Annotated[tuple[Toleration, ...], NoDecode] = Field(
        default=(),
        description="tolerations of executor pods, a JSON list of Kubernetes tolerations",
        json_schema_extra=doc(helm="executor.tolerations"),
    )
    pod_annotations: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="extra annotations on executor pods, a JSON object",
        json_schema_extra=doc(helm="executor.podAnnotations"),
    )
    env_from_secrets: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="comma-separated names of Secrets whose keys become the executor's environment",
        json_schema_extra=doc(helm="executor.envFromSecrets"),
    )
    run_as_user: int = Field(
        default=10001,
        ge=1,
        description="uid (and gid) executor containers run as; never root",
        json_schema_extra=doc(helm="runAsUser"),
    )
    instance: str = Field(
        default="firstlume",
        description="labels the Jobs of this installation, so two installations share a namespace",
        json_schema_extra=doc(helm="the release name"),
    )
    kubeconfig: str | None = Field(
        default=None,
        description="path of a kubeconfig, outside a cluster; empty: the in-cluster service account",
        json_schema_extra=doc(default_text="in-cluster", empty_is_none=True),
    )
    context: str | None = Field(
        default=None,
        description="kubeconfig context",
        json_schema_extra=doc(default_text="the current one", empty_is_none=True),
    )
    launch_grace_seconds: float = Field(
        default=120.0,
        ge=0,
        description="how long a running phase may lack a visible Job before it counts as lost",
        json_schema_extra=doc(helm="executor.launchGraceSeconds"),
    )
    image_pull_grace_seconds: float = Field(
        default=120.0,
        ge=0,
        description="how long a pod may fail to pull its image before the run fails",
        json_schema_extra=doc(helm="executor.imagePullGraceSeconds"),
    )
    watch_timeout_seconds: int = Field(
        default=300, ge=1, description="server-side timeout of one watch request"
    )
    health_check_interval_seconds: float = Field(
        default=15.0,
        ge=0,
        description="least time between two full passes over the Jobs (the watch reports failures at once)",
        json_schema_extra=doc(helm="executor.healthCheckIntervalSeconds"),
    )

    _check_quantities = field_validator(
        "cpu_request", "cpu_limit", "memory_request", "memory_limit", "work_dir_size_limit"
    )(_quantity)
    _check_namespace = field_validator("namespace")(_dns_label)

    @field_validator("image_pull_secrets", "env_from_secrets", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return _comma_list(value)

    @field_validator("image_pull_secrets", "env_from_secrets")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _object_names(value)

    @field_validator("service_account")
    @classmethod
    def _service_account(cls, value: str) -> str:
        _object_names((value,))
        return value

    @field_validator("node_selector", "pod_annotations", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        return _json_text(value, dict, "a JSON object")

    @field_validator("tolerations", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        return _json_text(value, list, "a JSON list of tolerations")

    @field_validator("instance")
    @classmethod
    def _label_value(cls, value: str) -> str:
        if not _LABEL_VALUE.match(value) or not 0 < len(value) <= 63:
            raise ValueError(
                "must be a Kubernetes label value (letters, digits, '-', '_', '.'; at most 63), "
                f"got {value!r}"
            )
        return value


# -- the control plane -----------------------------------------------------------------------

DATABASE_SCHEMES = ("sqlite+aiosqlite://", "postgresql+asyncpg://")
DEFAULT_DATA_DIR = "./.firstlume"


class Settings(_EnvSettings):
    """FIRSTLUME_*: the control plane's settings."""

    model_config = SettingsConfigDict(
        env_prefix="FIRSTLUME_", frozen=True, extra="ignore", populate_by_name=True, validate_default=True
    )

    data_dir: Path = Field(
        default=Path(DEFAULT_DATA_DIR),
        description="embedded database, demo repository, executor logs, generated key",
        json_schema_extra=doc(default_text=f"`{DEFAULT_DATA_DIR}`"),
    )
    database_url: str = Field(
        default="",
        description="`sqlite+aiosqlite:///…` or `postgresql+asyncpg://…`",
        json_schema_extra=doc(default_text="SQLite in the data dir", secret=True),
    )
    encryption_keys: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="comma-separated base64 32-byte keys, newest first (`firstlume keygen`)",
        json_schema_extra=doc(default_text="generated file (SQLite only)", secret=True),
    )
    database_pool_size: int = Field(
        default=20,
        ge=1,
        le=1000,
        description=(
            "PostgreSQL connections each process keeps open for requests and the scheduler; with "
            "the overflow below, the most it opens is their sum (plus up to 7 of the outbox relay, "
            "the senders and the live-update listener), so replicas × that must stay under the "
            "server's max_connections"
        ),
        json_schema_extra=doc(helm="controlPlane.databasePoolSize"),
    )
    database_max_overflow: int = Field(
        default=20,
        ge=0,
        le=1000,
        description="PostgreSQL connections opened beyond the pool for a burst and closed when returned",
        json_schema_extra=doc(helm="controlPlane.databaseMaxOverflow"),
    )
    database_pool_timeout: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description=(
            "seconds a request waits for a PostgreSQL connection when the pool and its overflow "
            "are all in use, before it is answered 503 `storage_unavailable` (retry in a moment)"
        ),
        json_schema_extra=doc(helm="controlPlane.databasePoolTimeout"),
    )
    heartbeat_timeout: float = Field(
        default=600.0,
        gt=0,
        description="seconds without an executor heartbeat before its run fails",
        json_schema_extra=doc(helm="controlPlane.heartbeatTimeout"),
    )
    scheduler_enabled: bool = Field(
        default=True,
        validation_alias="FIRSTLUME_SCHEDULER",
        description="`off` for a replica that only serves the API",
        json_schema_extra=doc(helm="controlPlane.scheduler"),
    )
    launcher: Literal["local", "kubernetes", "simulated"] = Field(
        default="local",
        description=(
            "`local` (subprocess) or `kubernetes` (Job per phase); `simulated` is a load-testing "
            "tool (bench/fleet.py): simulated executors, no Terraform, nothing applied"
        ),
    )
    public_url: str = Field(
        default="http://127.0.0.1:8000",
        description="URL executors use to reach the control plane",
        json_schema_extra=doc(helm="controlPlane.publicUrl"),
    )
    pubsub_url: str = Field(
        default="",
        description=(
            "where live events travel between processes: `memory://` (one process), "
            "`postgres://…` (LISTEN/NOTIFY) or `redis://…` / `rediss://…` (Redis pub/sub)"
        ),
        json_schema_extra=doc(default_text="`memory://`, or the database with PostgreSQL", secret=True),
    )
    scheduler_interval: float = Field(
        default=1.0,
        gt=0,
        description="seconds between scheduler passes (it also wakes on events)",
        json_schema_extra=doc(helm="controlPlane.schedulerInterval"),
    )
    git_poll_interval: float = Field(
        default=60.0,
        ge=0,
        description="seconds between polls of the triggered stacks' branch heads; `0` turns polling off",
        json_schema_extra=doc(helm="controlPlane.gitPollInterval"),
    )
    executor_heartbeat_interval: float = Field(
        default=10.0, gt=0, description="seconds between an executor's heartbeats"
    )
    policy_time_limit: float = Field(
        default=2.0,
        gt=0,
        le=20,
        description="seconds each policy may take at the end of a plan (at most 20, as all of a run's together); a slower one is stopped and fails the run",
    )
    allow_private_webhooks: bool = Field(
        default=False,
        description="`true` lets notification URLs reach loopback, link-local and private addresses",
    )
    notification_first_retry: float = Field(
        default=10.0,
        gt=0,
        description="seconds before a failed notification's first retry (doubling, up to an hour)",
    )
    notification_lease: float = Field(
        default=60.0,
        gt=0,
        description="seconds a replica keeps its claim on a notification being sent before another may send it again",
    )
    deleted_stack_retention_days: float = Field(
        default=30.0,
        gt=0,
        description=(
            "days a deleted stack is kept, with its runs and state versions, readable by admins, "
            "before it is purged"
        ),
    )
    executor_sandbox: Literal["auto", "bubblewrap", "off"] = Field(
        default="auto",
        description=(
            "local executors: `bubblewrap` runs each in a sandbox (fails to start without it), "
            "`auto` does where /usr/bin/bwrap works, `off` never"
        ),
    )
    executor_work_dir: Path = Field(
        default=Path(""),
        description="local executors: where their work dirs are made (never inside the data dir)",
        json_schema_extra=doc(default_text="`firstlume-executors-<uid>` in the system's temporary directory"),
    )
    simulated_resources: int = Field(
        default=50,
        ge=0,
        le=100_000,
        description="`FIRSTLUME_LAUNCHER=simulated` only: resources in each simulated plan",
    )
    simulated_log_lines: int = Field(
        default=2000,
        ge=0,
        description="`FIRSTLUME_LAUNCHER=simulated` only: log lines each simulated apply writes",
    )
    simulated_lines_per_second: float = Field(
        default=100.0,
        gt=0,
        description="`FIRSTLUME_LAUNCHER=simulated` only: how fast each simulated apply writes them",
    )
    simulated_record_dir: Path | None = Field(
        default=None,
        description=(
            "`FIRSTLUME_LAUNCHER=simulated` only: where each simulated phase writes what it sent "
            "(for a benchmark's checks)"
        ),
        json_schema_extra=doc(default_text="nowhere"),
    )
    executor_spares: int = Field(
        default=3,
        ge=0,
        le=16,
        description=(
            "local executors: how many are started ahead of launches while none runs (one while "
            "some run); each is a waiting Python process, `0` starts every executor at its launch"
        ),
    )
    executor_env: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description=(
            "local executors: comma-separated names of the control plane's environment variables "
            "they also get (PATH, locale, proxy and CA settings always pass; HOME is their own)"
        ),
        json_schema_extra=doc(default_text="none"),
    )
    max_json_body_bytes: int = Field(
        default=4 * 1024 * 1024,
        gt=0,
        description="largest request body of the API, in bytes, but for uploads (larger: 413)",
    )
    max_upload_bytes: int = Field(
        default=256 * 1024 * 1024,
        gt=0,
        description="largest plan upload (executor) or state write (Terraform's http backend), in bytes (larger: 413)",
    )
    tls_cert: Path | None = Field(
        default=None,
        description="PEM certificate (chain) to serve HTTPS with (`serve --tls-cert`); the Terraform CLI speaks only HTTPS",
        json_schema_extra=doc(default_text="none: plain HTTP"),
    )
    tls_key: Path | None = Field(
        default=None,
        description="PEM private key of the TLS certificate (`serve --tls-key`)",
        json_schema_extra=doc(default_text="none", secret=True),
    )
    log_format: Literal["json", "text"] = Field(
        default="json",
        description="`json`: one object per line with a request id; `text` for a terminal (`make run`)",
    )
    git_timeout: float = Field(
        default=120.0,
        gt=0,
        description="seconds an executor waits on each network step of a checkout (connect, fetch) before the run fails naming the step",
    )
    oidc_issuer: str = Field(
        default="",
        description='the OpenID Connect provider\'s issuer URL; with it the UI offers "Sign in with …" (README: Single sign-on)',
        json_schema_extra=doc(default_text="none (sign-in by API token only)"),
    )
    oidc_client_id: str = Field(default="", description="Firstlume's client id at the provider")
    oidc_client_secret: str = Field(
        default="",
        description="Firstlume's client secret at the provider",
        json_schema_extra=doc(secret=True),
    )
    oidc_groups_claim: str = Field(
        default="groups", description="the ID token's claim that lists the person's groups at the provider"
    )
    oidc_scopes: str = Field(
        default="openid email profile",
        description="scopes asked of the provider (space-separated; `openid` is always asked)",
    )
    session_hours: float = Field(
        default=12.0,
        gt=0,
        description="hours a browser's sign-in session lasts before the person signs in again",
    )
    k8s: KubernetesSettings = Field(
        default_factory=KubernetesSettings,
        description='the Kubernetes launcher\'s settings: see "Configure the executors" below',
    )

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.resolve()

    @field_validator("encryption_keys", "executor_env", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return _comma_list(value)

    @field_validator("public_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str) -> str:
        if value and not value.startswith(DATABASE_SCHEMES):
            # Never the value: it may hold a password.
            raise ValueError("must start with sqlite+aiosqlite:// or postgresql+asyncpg://.")
        return value

    @model_validator(mode="after")
    def _derived_defaults(self) -> Settings:
        # The model is frozen; these two are filled in once, while it is being built.
        if not self.database_url:
            object.__setattr__(self, "database_url", f"sqlite+aiosqlite:///{self.data_dir / 'firstlume.db'}")
        if not self.pubsub_url:
            pubsub = "memory://"
            if self.database_url.startswith("postgresql"):
                pubsub = "postgres://" + self.database_url.split("://", 1)[1]
            object.__setattr__(self, "pubsub_url", pubsub)
        if self.executor_work_dir == Path("") or str(self.executor_work_dir) in ("", "."):
            default_work = Path(tempfile.gettempdir()) / f"firstlume-executors-{os.getuid()}"
            object.__setattr__(self, "executor_work_dir", default_work)
        work = self.executor_work_dir.resolve()
        object.__setattr__(self, "executor_work_dir", work)
        if work.is_relative_to(self.data_dir) or self.data_dir.is_relative_to(work):
            raise ValueError(
                "FIRSTLUME_EXECUTOR_WORK_DIR must be outside the data dir (and not contain it): "
                "an executor must not reach the database or the key"
            )
        if self.launcher == "kubernetes" and not self.k8s.image:
            raise ValueError(
                f"{K8S_PREFIX}IMAGE is required with FIRSTLUME_LAUNCHER=kubernetes: the image executors run in"
            )
        return self

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from `environ` (the process environment by default); `overrides` win.

        Raises SettingsError naming each bad variable and what it expected."""
        problems: list[str] = []
        with reading(environ):
            try:
                k8s = KubernetesSettings()
            except ValidationError as error:
                problems.append(describe(error, KubernetesSettings))
                k8s = KubernetesSettings.model_construct()
            try:
                settings = cls(k8s=k8s, **overrides)
            except ValidationError as error:
                problems.append(describe(error, cls))
        if problems:
            raise SettingsError("\n".join(problems))
        return settings


@contextmanager
def reading(environ: Mapping[str, str] | None) -> Iterator[None]:
    """Settings built inside read `environ` instead of the process environment."""
    token = _ENVIRON.set(environ)
    try:
        yield
    finally:
        _ENVIRON.reset(token)


# -- names and messages ----------------------------------------------------------------------


def env_name(model: type[BaseSettings], name: str) -> str:
    """The environment variable a field is read from."""
    field = model.model_fields[name]
    if isinstance(field.validation_alias, str):
        return field.validation_alias.upper()
    return f"{model.model_config.get('env_prefix', '')}{name}".upper()


def _field_of(model: type[BaseSettings], key: Any) -> str | None:
    if not isinstance(key, str):
        return None
    if key in model.model_fields:
        return key
    for name, field in model.model_fields.items():
        if isinstance(field.validation_alias, str) and field.validation_alias.lower() == key.lower():
            return name
    return None


_PLAIN = {
    "bool_parsing": "must be on or off",
    "bool_type": "must be on or off",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "int_type": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "string_type": "must be a string",
    "dict_type": "must be a JSON object",
    "extra_forbidden": "is not a known field",
}


def _message(error: Any) -> str:
    kind = error["type"]
    context = error.get("ctx") or {}
    if kind in _PLAIN:
        return _PLAIN[kind]
    if kind == "value_error":
        return str(context.get("error", error["msg"]))
    if kind == "greater_than":
        return f"must be greater than {context['gt']}"
    if kind == "greater_than_equal":
        return f"must be at least {context['ge']}"
    if kind == "literal_error":
        return f"must be one of {context['expected']}"
    message = str(error["msg"])
    return (
        "must be " + message.removeprefix("Input should be ")
        if message.startswith("Input should")
        else message
    )


def describe(error: ValidationError, model: type[BaseSettings]) -> str:
    """One line per problem: the variable, what it expected and, unless secret, what it got."""
    lines = []
    for item in error.errors():
        loc = list(item["loc"])
        field = _field_of(model, loc[0]) if loc else None
        message = _message(item)
        if field is None:  # a check across fields names its variables itself
            lines.append(message)
            continue
        where = env_name(model, field) + "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc[1:]
        )
        secret = field_doc(model.model_fields[field]).get("secret")
        got = item.get("input")
        if item["type"] != "value_error" and not secret and isinstance(got, str | int | float):
            message += f" (got {got!r})"
        lines.append(f"{where} {message}")
    return "\n".join(lines)
