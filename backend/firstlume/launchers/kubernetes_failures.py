"""Why an executor's Job or pod is dead, in words for the run's error: a pure classifier.

Input is what the API server returns (the official client's V1Job and V1Pod); output is a
sentence naming the cause (out of memory, deadline exceeded, evicted, image pull failure, exit
code) or None while the executor may still run. No I/O: tests feed it recorded objects.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kubernetes.client import V1Job, V1Pod
from kubernetes.client.exceptions import ApiException

# Waiting reasons after which a container will not start by itself. ErrImagePull alone is the
# first, possibly transient, failure; the kubelet turns it into ImagePullBackOff when it repeats.
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
STUCK_REASONS = frozenset(
    {"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError"}
)
MAX_MESSAGE = 300


def _true_condition(job: V1Job, types: Iterable[str]) -> Any:
    wanted = tuple(types)
    for condition in (job.status.conditions if job.status else None) or []:
        if condition.type in wanted and condition.status == "True":
            return condition
    return None


def job_failed(job: V1Job) -> bool:
    # FailureTarget comes first (Kubernetes 1.31+), Failed once the pods are gone.
    return _true_condition(job, ("Failed", "FailureTarget")) is not None


def job_succeeded(job: V1Job) -> bool:
    return _true_condition(job, ("Complete", "SuccessCriteriaMet")) is not None


def _short(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def _newest_first(pods: Iterable[V1Pod]) -> list[V1Pod]:
    def created(pod: V1Pod) -> float:
        stamp = pod.metadata.creation_timestamp if pod.metadata else None
        return stamp.timestamp() if stamp else 0.0

    return sorted(pods, key=created, reverse=True)


def _statuses(pod: V1Pod) -> list[Any]:
    status = pod.status
    if status is None:
        return []
    return [*(status.init_container_statuses or []), *(status.container_statuses or [])]


def _memory_limit(pod: V1Pod, container_name: str) -> str | None:
    for container in (pod.spec.containers if pod.spec else None) or []:
        if container.name == container_name and container.resources and container.resources.limits:
            return container.resources.limits.get("memory")
    return None


def _out_of_memory(pod: V1Pod) -> str | None:
    for status in _statuses(pod):
        for state in (status.state, status.last_state):
            terminated = state.terminated if state else None
            if terminated is not None and terminated.reason == "OOMKilled":
                limit = _memory_limit(pod, status.name)
                within = f" of {limit}" if limit else ""
                return (
                    f"out of memory: the executor was killed (OOMKilled) for exceeding its memory "
                    f"limit{within}; raise FIRSTLUME_K8S_MEMORY_LIMIT"
                )
    return None


def _evicted(pod: V1Pod) -> str | None:
    status = pod.status
    if status is None:
        return None
    if status.reason == "Evicted":
        return f"evicted: {_short(status.message) or 'the node evicted the executor pod'}"
    for condition in status.conditions or []:
        if condition.type == "DisruptionTarget" and condition.status == "True":
            detail = _short(condition.message) or "the executor pod was disrupted"
            return f"evicted ({condition.reason}): {detail}"
    return None


def _waiting(pods: Iterable[V1Pod], reasons: frozenset[str]) -> str | None:
    for pod in pods:
        for status in _statuses(pod):
            waiting = status.state.waiting if status.state else None
            if waiting is None or waiting.reason not in reasons:
                continue
            if waiting.reason in IMAGE_PULL_REASONS:
                return (
                    f"image pull failure: could not pull image {status.image} "
                    f"({waiting.reason}: {_short(waiting.message)})"
                )
            return (
                f"the executor container could not be created ({waiting.reason}: {_short(waiting.message)})"
            )
    return None


def stuck_reason(pods: Iterable[V1Pod]) -> str | None:
    """Why a pending pod will never start on its own (image pull, missing Secret), or None."""
    return _waiting(_newest_first(pods), STUCK_REASONS)


def _unschedulable(pods: Iterable[V1Pod]) -> str | None:
    for pod in pods:
        for condition in (pod.status.conditions if pod.status else None) or []:
            if condition.type == "PodScheduled" and condition.status == "False":
                return _short(condition.message) or condition.reason
    return None


def _exit_code(pods: Iterable[V1Pod]) -> str | None:
    for pod in pods:
        for status in _statuses(pod):
            terminated = status.state.terminated if status.state else None
            if terminated is None or terminated.exit_code == 0:
                continue
            text = f"the executor exited with exit code {terminated.exit_code}"
            if terminated.reason and terminated.reason not in ("Error", "Completed"):
                text += f" ({terminated.reason})"
            if terminated.message:
                text += f": {_short(terminated.message)}"
            return text
    return None


def failure_reason(job: V1Job, pods: list[V1Pod]) -> str | None:
    """Why the phase's executor is dead, in words for the run's error; None while it may still run.

    A failed Job is classified from its pods first, because the Job's own condition often names
    only the consequence (a pod stuck pulling its image ends in DeadlineExceeded)."""
    ordered = _newest_first(pods)
    if not job_failed(job):
        return stuck_reason(ordered)
    for pod in ordered:
        if reason := _out_of_memory(pod):
            return reason
    for pod in ordered:
        if reason := _evicted(pod):
            return reason
    if reason := _waiting(ordered, IMAGE_PULL_REASONS | STUCK_REASONS):
        return reason
    condition = _true_condition(job, ("Failed", "FailureTarget"))
    if condition.reason == "DeadlineExceeded":
        deadline = job.spec.active_deadline_seconds if job.spec else None
        text = "deadline exceeded: the phase ran longer than its deadline"
        if deadline:
            text += f" of {deadline} s (FIRSTLUME_K8S_ACTIVE_DEADLINE_SECONDS)"
        if unschedulable := _unschedulable(ordered):
            text += f"; the pod was never scheduled: {unschedulable}"
        return text
    if reason := _exit_code(ordered):
        return reason
    detail = ": ".join(part for part in (condition.reason, _short(condition.message)) if part)
    return f"the executor Job failed{': ' + detail if detail else ''}"


def api_message(exc: ApiException) -> str:
    """An API server's refusal in words: status, reason and its message, never the request body."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return f"{exc.status} {exc.reason}" + (f": {_short(message)}" if message else "")
