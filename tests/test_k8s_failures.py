"""The pure classifier of a phase's Job and pods, on objects in the API server's wire format.

Each fixture in tests/fixtures/kubernetes/ holds a Job and its pods as a Kubernetes API server
(1.31, and 1.25 for one) returns them from GET, managed fields and server-set defaults included,
for one way an executor ends. They are turned into the client's models exactly as the client
does with a real response (`ApiClient.deserialize`), and checked against the official schemas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes.client import ApiClient, V1Job, V1Pod

from firstlume.launchers.kubernetes_failures import (
    failure_reason,
    job_failed,
    job_succeeded,
    stuck_reason,
)

FIXTURES = Path(__file__).parent / "fixtures" / "kubernetes"
CLIENT = ApiClient()


def raw(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())  # type: ignore[no-any-return]


def recorded(name: str) -> tuple[V1Job, list[V1Pod]]:
    document = raw(name)
    job = CLIENT.deserialize(json.dumps(document["job"]), "V1Job", "application/json")
    pods = [CLIENT.deserialize(json.dumps(pod), "V1Pod", "application/json") for pod in document["pods"]]
    return job, pods


ALL = sorted(path.stem for path in FIXTURES.glob("*.json"))


@pytest.mark.parametrize("name", ALL)
def test_the_fixtures_are_valid_api_objects(name: str) -> None:
    document = raw(name)
    versions = ["1.25.0"] if "1.25" in name else ["1.31.0"]
    for obj in [document["job"], *document["pods"]]:
        for version in [*versions, "1.37.0"]:
            kubernetes_validate.validate(obj, version, strict=True)


# Each way a phase's executor ends, and the run's error it becomes.
FAILED = {
    "oom-killed": (
        "out of memory: the executor was killed (OOMKilled) for exceeding its memory limit of 2Gi; "
        "raise FIRSTLUME_K8S_MEMORY_LIMIT"
    ),
    "oom-killed-kubernetes-1.25": (
        "out of memory: the executor was killed (OOMKilled) for exceeding its memory limit of 2Gi; "
        "raise FIRSTLUME_K8S_MEMORY_LIMIT"
    ),
    "deadline-exceeded": (
        "deadline exceeded: the phase ran longer than its deadline of 10800 s "
        "(FIRSTLUME_K8S_ACTIVE_DEADLINE_SECONDS)"
    ),
    "never-scheduled-deadline": (
        "deadline exceeded: the phase ran longer than its deadline of 10800 s "
        "(FIRSTLUME_K8S_ACTIVE_DEADLINE_SECONDS); the pod was never scheduled: 0/3 nodes are available: "
        "3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: "
        "3 Preemption is not helpful for scheduling."
    ),
    "evicted": (
        "evicted: The node was low on resource: ephemeral-storage. Threshold quantity: 2139512454, "
        "available: 1980144Ki. Container executor was using 4194304Ki, request is 0, has larger "
        "consumption of ephemeral-storage."
    ),
    "preempted": (
        "evicted (PreemptionByScheduler): default-scheduler: preempting to accommodate a higher priority pod"
    ),
    "image-pull-backoff-deadline": (
        "image pull failure: could not pull image registry.example/firstlume:1.4.0 "
        '(ImagePullBackOff: Back-off pulling image "registry.example/firstlume:1.4.0")'
    ),
    "exit-code": "the executor exited with exit code 3: cannot reach the control plane",
    "start-error": (
        "the executor exited with exit code 128 (StartError): failed to create containerd task: failed to "
        "create shim task: OCI runtime create failed: runc create failed: unable to start container "
        'process: exec: "firstlume": executable file not found in $PATH: unknown'
    ),
    "pods-collected": "the executor Job failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
}

# Pending pods that will never start by themselves.
STUCK = {
    "image-pull-backoff": (
        "image pull failure: could not pull image registry.example/firstlume:1.4.0 "
        '(ImagePullBackOff: Back-off pulling image "registry.example/firstlume:1.4.0")'
    ),
    "missing-secret": (
        'the executor container could not be created (CreateContainerConfigError: secret "cloud-credentials" not found)'
    ),
}

# Alive, or may still become so.
ALIVE = ["running", "succeeded", "err-image-pull", "unschedulable"]


def test_every_fixture_has_an_expectation() -> None:
    assert sorted([*FAILED, *STUCK, *ALIVE]) == ALL


@pytest.mark.parametrize(("name", "reason"), FAILED.items())
def test_a_failed_job_is_classified_by_its_cause(name: str, reason: str) -> None:
    job, pods = recorded(name)
    assert job_failed(job) and not job_succeeded(job)
    assert failure_reason(job, pods) == reason


@pytest.mark.parametrize(("name", "reason"), STUCK.items())
def test_a_pod_that_cannot_start_is_stuck_before_its_job_fails(name: str, reason: str) -> None:
    job, pods = recorded(name)
    assert not job_failed(job)
    assert stuck_reason(pods) == reason
    assert failure_reason(job, pods) == reason


@pytest.mark.parametrize("name", ALIVE)
def test_a_running_pending_or_succeeded_phase_has_no_failure(name: str) -> None:
    job, pods = recorded(name)
    assert not job_failed(job)
    assert failure_reason(job, pods) is None
    assert stuck_reason(pods) is None


def test_a_succeeded_job_is_complete() -> None:
    job, _ = recorded("succeeded")
    assert job_succeeded(job)


def test_out_of_memory_is_named_even_when_another_pod_failed_otherwise() -> None:
    # The cause that tells the operator what to change wins over its consequences.
    job, (oom,) = recorded("oom-killed")
    _, (exited,) = recorded("exit-code")
    _, (evicted,) = recorded("evicted")
    exited.metadata.name, evicted.metadata.name = "newer", "newest"
    exited.metadata.creation_timestamp = oom.metadata.creation_timestamp.replace(minute=30)
    evicted.metadata.creation_timestamp = oom.metadata.creation_timestamp.replace(minute=40)
    assert failure_reason(job, [exited, evicted, oom]).startswith("out of memory")
    assert failure_reason(job, [exited, evicted]).startswith("evicted")


def test_a_long_node_message_is_shortened() -> None:
    job, (pod,) = recorded("evicted")
    pod.status.message = "The node was low on resource: memory. " + "x" * 1000
    reason = failure_reason(job, [pod])
    assert reason is not None and len(reason) < 320 and reason.endswith("…")
