"""Pure builders of the Kubernetes objects of one run phase: its Job and its token Secret.

Plain dicts in the API's wire shape (camelCase), so they can be validated against the official
schemas and turned into the client's models with `V1Job.from_dict`. No I/O here.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from firstlume.launchers.base import PhaseLaunch, PhaseRef
from firstlume.settings import KubernetesSettings

DOMAIN = "firstlume.dev"
LABEL_RUN = f"{DOMAIN}/run-id"
LABEL_PHASE = f"{DOMAIN}/phase"
LABEL_ATTEMPT = f"{DOMAIN}/attempt"
LABEL_INSTANCE = f"{DOMAIN}/instance"
ANNOTATION_RUN = f"{DOMAIN}/run-id"
ANNOTATION_PHASE = f"{DOMAIN}/phase"
ANNOTATION_ATTEMPT = f"{DOMAIN}/attempt"
ANNOTATION_ORG = f"{DOMAIN}/org"
ANNOTATION_STACK = f"{DOMAIN}/stack"

MANAGED_BY = "firstlume"
COMPONENT = "executor"
CONTAINER_NAME = "executor"
TOKEN_KEY = "token"
WORK_DIR = "/work"
TMP_DIR = "/tmp"
MAX_NAME = 63

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_PHASE = re.compile(r"^[a-z][a-z0-9]*$")


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _check_ref(run_id: str, phase: str, attempt: int) -> None:
    if not run_id:
        raise ValueError("run id must not be empty")
    if not _PHASE.match(phase) or len(phase) > 16:
        raise ValueError(f"phase must be a short lowercase word such as plan or apply, got {phase!r}")
    if attempt < 0:
        raise ValueError(f"attempt must be 0 or more, got {attempt}")


def job_name(run_id: str, phase: str, attempt: int) -> str:
    """`fl-<run id>-<phase>-<attempt>`, a DNS-1123 label of at most 63 characters.

    The run id is kept as is when it is already lowercase DNS-safe and fits; otherwise it is
    shortened and a hash of the full id keeps distinct runs apart (ids may differ only by case)."""
    _check_ref(run_id, phase, attempt)
    suffix = f"-{phase}-{attempt}"
    room = MAX_NAME - len("fl-") - len(suffix)
    if re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", run_id) and len(run_id) <= room:
        return f"fl-{run_id}{suffix}"
    digest = _digest(run_id, 10)
    readable = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-")
    readable = readable[: room - len(digest) - 1].strip("-")
    middle = f"{readable}-{digest}" if readable else digest
    return f"fl-{middle}{suffix}"


def secret_name(run_id: str, phase: str, attempt: int) -> str:
    return f"{job_name(run_id, phase, attempt)}-token"


def label_value(value: str) -> str:
    """The value itself when Kubernetes accepts it as a label value, else a stable hash of it.

    Annotations always carry the full value; the label is what selectors use."""
    if len(value) <= 63 and _LABEL_VALUE.match(value):
        return value
    return "h-" + _digest(value, 40)


def instance_selector(config: KubernetesSettings) -> str:
    """Selects every object the launcher of this installation creates."""
    return (
        f"app.kubernetes.io/managed-by={MANAGED_BY},app.kubernetes.io/component={COMPONENT},"
        f"{LABEL_INSTANCE}={config.instance}"
    )


def run_selector(config: KubernetesSettings, run_id: str) -> str:
    return f"{instance_selector(config)},{LABEL_RUN}={label_value(run_id)}"


def phase_selector(config: KubernetesSettings, ref: PhaseRef) -> str:
    return f"{run_selector(config, ref.run_id)},{LABEL_PHASE}={ref.phase},{LABEL_ATTEMPT}={ref.attempt}"


def labels(config: KubernetesSettings, ref: PhaseRef) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "firstlume",
        "app.kubernetes.io/component": COMPONENT,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_INSTANCE: config.instance,
        LABEL_RUN: label_value(ref.run_id),
        LABEL_PHASE: ref.phase,
        LABEL_ATTEMPT: str(ref.attempt),
    }


def phase_annotations(launch: PhaseLaunch) -> dict[str, str]:
    return {
        ANNOTATION_RUN: launch.run_id,
        ANNOTATION_PHASE: launch.phase,
        ANNOTATION_ATTEMPT: str(launch.attempt),
        ANNOTATION_ORG: launch.org_slug,
        ANNOTATION_STACK: launch.stack_slug,
    }


def ref_of(
    metadata_labels: dict[str, str] | None, metadata_annotations: dict[str, str] | None
) -> PhaseRef | None:
    """The phase an object belongs to, read back from its annotations (full ids), or None."""
    notes = metadata_annotations or {}
    marks = metadata_labels or {}
    run_id = notes.get(ANNOTATION_RUN)
    phase = notes.get(ANNOTATION_PHASE) or marks.get(LABEL_PHASE)
    attempt = notes.get(ANNOTATION_ATTEMPT) or marks.get(LABEL_ATTEMPT)
    if not run_id or not phase or attempt is None:
        return None
    try:
        return PhaseRef(run_id=run_id, phase=phase, attempt=int(attempt))
    except ValueError:
        return None


def ref_of_launch(launch: PhaseLaunch) -> PhaseRef:
    return PhaseRef(run_id=launch.run_id, phase=launch.phase, attempt=launch.attempt)


def token_secret(config: KubernetesSettings, launch: PhaseLaunch) -> dict[str, Any]:
    """The Secret holding the phase token. The launcher makes the Job its owner once the Job exists."""
    ref = ref_of_launch(launch)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(launch.run_id, launch.phase, launch.attempt),
            "namespace": config.namespace,
            "labels": labels(config, ref),
            "annotations": phase_annotations(launch),
        },
        "type": "Opaque",
        # Immutable: the kubelet need not watch it, and nobody can swap the token under a pod.
        "immutable": True,
        "data": {TOKEN_KEY: base64.b64encode(launch.token.encode()).decode()},
    }


def owner_reference(job_name_: str, job_uid: str) -> dict[str, Any]:
    """Makes the Job the Secret's owner, so the garbage collector deletes the Secret with it."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job_name_,
        "uid": job_uid,
        "controller": False,
        "blockOwnerDeletion": False,
    }


def secret_owner_patch(job_name_: str, job_uid: str) -> dict[str, Any]:
    return {"metadata": {"ownerReferences": [owner_reference(job_name_, job_uid)]}}


def _resources(config: KubernetesSettings) -> dict[str, Any]:
    requests = {
        key: value
        for key, value in (("cpu", config.cpu_request), ("memory", config.memory_request))
        if value is not None
    }
    limits = {
        key: value
        for key, value in (("cpu", config.cpu_limit), ("memory", config.memory_limit))
        if value is not None
    }
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return resources


def _env(launch: PhaseLaunch, token_secret_name: str) -> list[dict[str, Any]]:
    return [
        {"name": "FIRSTLUME_CONTROL_PLANE_URL", "value": launch.control_plane_url},
        {
            "name": "FIRSTLUME_EXECUTOR_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": token_secret_name, "key": TOKEN_KEY}},
        },
        {"name": "FIRSTLUME_RUN_ID", "value": launch.run_id},
        {"name": "FIRSTLUME_PHASE", "value": launch.phase},
        {"name": "FIRSTLUME_ATTEMPT", "value": str(launch.attempt)},
        {"name": "FIRSTLUME_WORK_DIR", "value": WORK_DIR},
        # The root filesystem is read-only: everything that writes goes to the two emptyDirs.
        {"name": "HOME", "value": TMP_DIR},
        {"name": "TMPDIR", "value": TMP_DIR},
        {"name": "TF_IN_AUTOMATION", "value": "1"},
        {"name": "CHECKPOINT_DISABLE", "value": "1"},
    ]


def job(config: KubernetesSettings, launch: PhaseLaunch) -> dict[str, Any]:
    """The Job of one run phase: one pod, never retried, hardened, the token only by reference."""
    ref = ref_of_launch(launch)
    name = job_name(launch.run_id, launch.phase, launch.attempt)
    object_labels = labels(config, ref)
    pod_annotations = {**config.pod_annotations, **phase_annotations(launch)}
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": config.image,
        "imagePullPolicy": config.image_pull_policy,
        "command": ["firstlume", "executor"],
        "env": _env(launch, secret_name(launch.run_id, launch.phase, launch.attempt)),
        "resources": _resources(config),
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": config.run_as_user,
            "runAsGroup": config.run_as_user,
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "work", "mountPath": WORK_DIR},
            {"name": "tmp", "mountPath": TMP_DIR},
        ],
        # Only what the executor writes to the termination log on purpose reaches the run's
        # error; falling back to raw log lines could carry unmasked secrets.
        "terminationMessagePolicy": "File",
    }
    if config.env_from_secrets:
        container["envFrom"] = [{"secretRef": {"name": secret}} for secret in config.env_from_secrets]
    work_volume: dict[str, Any] = {}
    if config.work_dir_size_limit is not None:
        work_volume["sizeLimit"] = config.work_dir_size_limit
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": config.service_account,
        # The executor talks to the control plane only; it needs no Kubernetes API token.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 60,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": config.run_as_user,
            "runAsGroup": config.run_as_user,
            "fsGroup": config.run_as_user,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {"name": "work", "emptyDir": work_volume},
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        ],
    }
    if config.node_selector:
        pod_spec["nodeSelector"] = dict(config.node_selector)
    if config.tolerations:
        pod_spec["tolerations"] = [toleration.manifest() for toleration in config.tolerations]
    if config.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": secret} for secret in config.image_pull_secrets]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": config.namespace,
            "labels": object_labels,
            "annotations": phase_annotations(launch),
        },
        "spec": {
            "backoffLimit": 0,
            "completions": 1,
            "parallelism": 1,
            "activeDeadlineSeconds": config.active_deadline_seconds,
            "ttlSecondsAfterFinished": config.ttl_seconds_after_finished,
            "template": {
                "metadata": {"labels": object_labels, "annotations": pod_annotations},
                "spec": pod_spec,
            },
        },
    }
