"""Settings of the Kubernetes launcher, read from FIRSTLUME_K8S_* environment variables."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PREFIX = "FIRSTLUME_K8S_"

# Every variable the launcher reads, with what it means; the Helm chart's ConfigMap sets them.
ENV_VARS: dict[str, str] = {
    "FIRSTLUME_K8S_NAMESPACE": "namespace of the executor Jobs (default: default)",
    "FIRSTLUME_K8S_IMAGE": "executor image (required)",
    "FIRSTLUME_K8S_IMAGE_PULL_POLICY": "Always | IfNotPresent | Never (default: IfNotPresent)",
    "FIRSTLUME_K8S_IMAGE_PULL_SECRETS": "comma-separated Secret names for pulling the image",
    "FIRSTLUME_K8S_SERVICE_ACCOUNT": "service account of executor pods (default: firstlume-executor)",
    "FIRSTLUME_K8S_CPU_REQUEST": "CPU request, a Kubernetes quantity (default: 250m; empty: none)",
    "FIRSTLUME_K8S_CPU_LIMIT": "CPU limit (default: none)",
    "FIRSTLUME_K8S_MEMORY_REQUEST": "memory request (default: 512Mi; empty: none)",
    "FIRSTLUME_K8S_MEMORY_LIMIT": "memory limit (default: 2Gi; empty: none)",
    "FIRSTLUME_K8S_WORK_DIR_SIZE_LIMIT": "size limit of the writable work volume (default: 4Gi)",
    "FIRSTLUME_K8S_ACTIVE_DEADLINE_SECONDS": "activeDeadlineSeconds of a phase Job (default: 10800)",
    "FIRSTLUME_K8S_TTL_SECONDS_AFTER_FINISHED": "ttlSecondsAfterFinished of a phase Job (default: 3600)",
    "FIRSTLUME_K8S_NODE_SELECTOR": 'JSON object, e.g. {"pool": "runners"}',
    "FIRSTLUME_K8S_TOLERATIONS": "JSON list of Kubernetes tolerations",
    "FIRSTLUME_K8S_POD_ANNOTATIONS": "JSON object of extra annotations on executor pods",
    "FIRSTLUME_K8S_ENV_FROM_SECRETS": "comma-separated Secret names whose keys become executor environment",
    "FIRSTLUME_K8S_RUN_AS_USER": "uid (and gid) executor containers run as (default: 10001)",
    "FIRSTLUME_K8S_INSTANCE": "names this installation in labels, so two installations share a namespace",
    "FIRSTLUME_K8S_KUBECONFIG": "path of a kubeconfig; empty: in-cluster configuration",
    "FIRSTLUME_K8S_CONTEXT": "kubeconfig context (default: the current one)",
    "FIRSTLUME_K8S_LAUNCH_GRACE_SECONDS": "how long a running phase may lack a visible Job (default: 120)",
    "FIRSTLUME_K8S_IMAGE_PULL_GRACE_SECONDS": "how long a pod may fail to pull its image (default: 120)",
    "FIRSTLUME_K8S_WATCH_TIMEOUT_SECONDS": "server-side timeout of one watch request (default: 300)",
    "FIRSTLUME_K8S_HEALTH_CHECK_INTERVAL_SECONDS": "least time between two full health passes (default: 15)",
}

PULL_POLICIES = ("Always", "IfNotPresent", "Never")
TOLERATION_KEYS = {"key", "operator", "value", "effect", "tolerationSeconds"}
TOLERATION_OPERATORS = ("Exists", "Equal")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# Kubernetes resource quantities: 250m, 1, 0.5, 512Mi, 2Gi, 1e3 ...
_QUANTITY = re.compile(
    r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+)?$"
)
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class KubernetesLauncherConfig:
    image: str
    namespace: str = "default"
    image_pull_policy: str = "IfNotPresent"
    image_pull_secrets: tuple[str, ...] = ()
    service_account: str = "firstlume-executor"
    cpu_request: str | None = "250m"
    cpu_limit: str | None = None
    memory_request: str | None = "512Mi"
    memory_limit: str | None = "2Gi"
    work_dir_size_limit: str | None = "4Gi"
    active_deadline_seconds: int = 10800
    ttl_seconds_after_finished: int = 3600
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    env_from_secrets: tuple[str, ...] = ()
    run_as_user: int = 10001
    instance: str = "firstlume"
    kubeconfig: str | None = None  # None: in-cluster configuration
    context: str | None = None
    launch_grace_seconds: float = 120.0
    image_pull_grace_seconds: float = 120.0
    watch_timeout_seconds: int = 300
    health_check_interval_seconds: float = 15.0

    def __post_init__(self) -> None:
        if not self.image.strip():
            raise ValueError(f"{PREFIX}IMAGE is required: the image executors run in")
        _check_dns_label("NAMESPACE", self.namespace)
        _check_dns_subdomain("SERVICE_ACCOUNT", self.service_account)
        if self.image_pull_policy not in PULL_POLICIES:
            raise ValueError(
                f"{PREFIX}IMAGE_PULL_POLICY must be one of {', '.join(PULL_POLICIES)}, "
                f"got {self.image_pull_policy!r}"
            )
        for name in self.image_pull_secrets:
            _check_dns_subdomain("IMAGE_PULL_SECRETS", name)
        for name in self.env_from_secrets:
            _check_dns_subdomain("ENV_FROM_SECRETS", name)
        for var, value in (
            ("CPU_REQUEST", self.cpu_request),
            ("CPU_LIMIT", self.cpu_limit),
            ("MEMORY_REQUEST", self.memory_request),
            ("MEMORY_LIMIT", self.memory_limit),
            ("WORK_DIR_SIZE_LIMIT", self.work_dir_size_limit),
        ):
            if value is not None and not _QUANTITY.match(value):
                raise ValueError(
                    f"{PREFIX}{var} must be a Kubernetes quantity such as 500m, 2 or 512Mi, got {value!r}"
                )
        if self.active_deadline_seconds < 1:
            raise ValueError(f"{PREFIX}ACTIVE_DEADLINE_SECONDS must be at least 1")
        if self.ttl_seconds_after_finished < 0:
            raise ValueError(f"{PREFIX}TTL_SECONDS_AFTER_FINISHED must be 0 or more")
        if self.run_as_user < 1:
            raise ValueError(f"{PREFIX}RUN_AS_USER must be a non-root uid (1 or more)")
        if not _LABEL_VALUE.match(self.instance) or not 0 < len(self.instance) <= 63:
            raise ValueError(
                f"{PREFIX}INSTANCE must be a Kubernetes label value (letters, digits, '-', '_', '.'; "
                f"at most 63), got {self.instance!r}"
            )
        for var, seconds in (
            ("LAUNCH_GRACE_SECONDS", self.launch_grace_seconds),
            ("IMAGE_PULL_GRACE_SECONDS", self.image_pull_grace_seconds),
            ("HEALTH_CHECK_INTERVAL_SECONDS", self.health_check_interval_seconds),
        ):
            if seconds < 0:
                raise ValueError(f"{PREFIX}{var} must be 0 or more")
        if self.watch_timeout_seconds < 1:
            raise ValueError(f"{PREFIX}WATCH_TIMEOUT_SECONDS must be at least 1")
        _check_string_map("NODE_SELECTOR", self.node_selector)
        _check_string_map("POD_ANNOTATIONS", self.pod_annotations)
        for toleration in self.tolerations:
            _check_toleration(toleration)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> KubernetesLauncherConfig:
        """Read the FIRSTLUME_K8S_* variables; an unset or blank variable keeps its default."""

        def get(name: str) -> str | None:
            value = environ.get(PREFIX + name)
            return None if value is None or not value.strip() else value.strip()

        kwargs: dict[str, Any] = {"image": get("IMAGE") or ""}
        for name, attr in (
            ("NAMESPACE", "namespace"),
            ("IMAGE_PULL_POLICY", "image_pull_policy"),
            ("SERVICE_ACCOUNT", "service_account"),
            ("INSTANCE", "instance"),
            ("KUBECONFIG", "kubeconfig"),
            ("CONTEXT", "context"),
        ):
            if (value := get(name)) is not None:
                kwargs[attr] = value
        # Resource settings: unset keeps the default, an explicitly empty value removes it.
        for name, attr in (
            ("CPU_REQUEST", "cpu_request"),
            ("CPU_LIMIT", "cpu_limit"),
            ("MEMORY_REQUEST", "memory_request"),
            ("MEMORY_LIMIT", "memory_limit"),
            ("WORK_DIR_SIZE_LIMIT", "work_dir_size_limit"),
        ):
            if PREFIX + name in environ:
                kwargs[attr] = get(name)
        for name, attr in (
            ("ACTIVE_DEADLINE_SECONDS", "active_deadline_seconds"),
            ("TTL_SECONDS_AFTER_FINISHED", "ttl_seconds_after_finished"),
            ("RUN_AS_USER", "run_as_user"),
            ("WATCH_TIMEOUT_SECONDS", "watch_timeout_seconds"),
        ):
            if (value := get(name)) is not None:
                kwargs[attr] = _int(name, value)
        for name, attr in (
            ("LAUNCH_GRACE_SECONDS", "launch_grace_seconds"),
            ("IMAGE_PULL_GRACE_SECONDS", "image_pull_grace_seconds"),
            ("HEALTH_CHECK_INTERVAL_SECONDS", "health_check_interval_seconds"),
        ):
            if (value := get(name)) is not None:
                kwargs[attr] = _float(name, value)
        for name, attr in (
            ("IMAGE_PULL_SECRETS", "image_pull_secrets"),
            ("ENV_FROM_SECRETS", "env_from_secrets"),
        ):
            if (value := get(name)) is not None:
                kwargs[attr] = tuple(part.strip() for part in value.split(",") if part.strip())
        for name, attr in (("NODE_SELECTOR", "node_selector"), ("POD_ANNOTATIONS", "pod_annotations")):
            if (value := get(name)) is not None:
                parsed = _json(name, value)
                if not isinstance(parsed, dict):
                    raise ValueError(f"{PREFIX}{name} must be a JSON object, got {type(parsed).__name__}")
                kwargs[attr] = parsed
        if (value := get("TOLERATIONS")) is not None:
            parsed = _json("TOLERATIONS", value)
            if not isinstance(parsed, list):
                raise ValueError(
                    f"{PREFIX}TOLERATIONS must be a JSON list of tolerations, got {type(parsed).__name__}"
                )
            kwargs["tolerations"] = tuple(parsed)
        return cls(**kwargs)


def _int(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{PREFIX}{name} must be a whole number of seconds, got {value!r}") from None


def _float(name: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{PREFIX}{name} must be a number of seconds, got {value!r}") from None


def _json(name: str, value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{PREFIX}{name} is not valid JSON: {exc.msg} at position {exc.pos}") from None


def _check_dns_label(name: str, value: str) -> None:
    if not _DNS1123_LABEL.match(value) or len(value) > 63:
        raise ValueError(
            f"{PREFIX}{name} must be a DNS-1123 label (lowercase letters, digits and '-', at most 63), "
            f"got {value!r}"
        )


def _check_dns_subdomain(name: str, value: str) -> None:
    if not _DNS1123_SUBDOMAIN.match(value) or len(value) > 253:
        raise ValueError(
            f"{PREFIX}{name} must hold Kubernetes object names (lowercase letters, digits, '-' and '.'), "
            f"got {value!r}"
        )


def _check_string_map(name: str, value: Mapping[str, Any]) -> None:
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ValueError(
                f"{PREFIX}{name} must map strings to strings, got {key!r}: {item!r} ({type(item).__name__})"
            )


def _check_toleration(toleration: Any) -> None:
    where = f"{PREFIX}TOLERATIONS"
    if not isinstance(toleration, Mapping):
        raise ValueError(f"{where}: each toleration must be an object, got {toleration!r}")
    unknown = set(toleration) - TOLERATION_KEYS
    if unknown:
        raise ValueError(
            f"{where}: unknown field(s) {', '.join(sorted(unknown))}; "
            f"expected {', '.join(sorted(TOLERATION_KEYS))}"
        )
    operator = toleration.get("operator", "Equal")
    if operator not in TOLERATION_OPERATORS:
        raise ValueError(f"{where}: operator must be Exists or Equal, got {operator!r}")
    effect = toleration.get("effect")
    if effect is not None and effect not in TOLERATION_EFFECTS:
        raise ValueError(f"{where}: effect must be one of {', '.join(TOLERATION_EFFECTS)}, got {effect!r}")
    for key in ("key", "value"):
        if key in toleration and not isinstance(toleration[key], str):
            raise ValueError(f"{where}: {key} must be a string, got {toleration[key]!r}")
    if operator == "Exists" and toleration.get("value"):
        raise ValueError(f"{where}: a toleration with operator Exists takes no value")
    if operator == "Equal" and not toleration.get("key"):
        raise ValueError(f"{where}: a toleration with operator Equal needs a key")
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None and (not isinstance(seconds, int) or isinstance(seconds, bool)):
        raise ValueError(f"{where}: tolerationSeconds must be a whole number, got {seconds!r}")
