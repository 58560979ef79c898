"""An in-memory stand-in of the parts of BatchV1Api and CoreV1Api the Kubernetes launcher uses.

It stores and returns the official client's own models (V1Job, V1Pod, V1Secret ...), raises the
client's ApiException subclasses like the real API server (404, 409, 422), plays the Job
controller (one pod per Job, owner references, cascading deletion) and answers the watch
requests `kubernetes.watch.Watch` makes: newline-separated JSON events after a resourceVersion,
an ERROR event with code 410 when that version was compacted away.

Helpers simulate what happens to a phase's pod: `run`, `exit`, `oom_kill`, `exceed_deadline`,
`evict`, `image_pull_backoff`, `fail_job`, `collect_pods`, `delete_out_of_band`.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import kubernetes_validate
from kubernetes.client import (
    ApiClient,
    V1ContainerState,
    V1ContainerStateRunning,
    V1ContainerStateTerminated,
    V1ContainerStateWaiting,
    V1ContainerStatus,
    V1Job,
    V1JobCondition,
    V1JobList,
    V1JobStatus,
    V1ListMeta,
    V1ObjectMeta,
    V1OwnerReference,
    V1Pod,
    V1PodCondition,
    V1PodList,
    V1PodStatus,
    V1Secret,
    V1SecretList,
    V1Status,
)
from kubernetes.client.exceptions import (
    ApiException,
    ConflictException,
    NotFoundException,
    UnprocessableEntityException,
)

_SERIALIZER = ApiClient()


class FakeClock:
    """Wall-clock seconds that only move when a test says so; shared by the fake and the launcher."""

    def __init__(self, start: datetime = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)) -> None:
        self._now = start.timestamp()
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def datetime(self) -> datetime:
        return datetime.fromtimestamp(self(), tz=UTC)


def _error(status: int, reason: str, message: str) -> ApiException:
    body = json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": status,
        }
    )
    cls: type[ApiException] = {
        404: NotFoundException,
        409: ConflictException,
        422: UnprocessableEntityException,
    }.get(status, ApiException)
    exc = cls(status=status, reason=reason)
    exc.body = body
    return exc


def _matches(selector: str | None, labels: dict[str, str] | None) -> bool:
    """Equality-based label selectors: `a=b`, `a==b`, `a!=b`, `a`, `!a`, comma-separated."""
    labels = labels or {}
    for term in filter(None, (part.strip() for part in (selector or "").split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


@dataclass
class _Event:
    rv: int
    kind: str
    type: str
    namespace: str
    labels: dict[str, str]
    raw: dict[str, Any]


class FakeKube:
    """The cluster: holds the objects, the event history and the open watches."""

    KINDS = ("jobs", "pods", "secrets")

    def __init__(self, clock: FakeClock | None = None, validate_version: str | None = "1.37.0") -> None:
        self.clock = clock or FakeClock()
        self.validate_version = validate_version
        self.batch = FakeBatchV1Api(self)
        self.core = FakeCoreV1Api(self)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._cond = threading.Condition(threading.RLock())
        self._rv = 0
        self._compacted_rv = 0
        self._held = False
        self._generation = 0
        self._objects: dict[str, dict[tuple[str, str], Any]] = {kind: {} for kind in self.KINDS}
        self._events: list[_Event] = []
        self._failures: dict[str, list[ApiException]] = {}

    # -- inspection -------------------------------------------------------------------------

    def jobs(self, namespace: str | None = None) -> list[V1Job]:
        return self._all("jobs", namespace)

    def pods(self, namespace: str | None = None) -> list[V1Pod]:
        return self._all("pods", namespace)

    def secrets(self, namespace: str | None = None) -> list[V1Secret]:
        return self._all("secrets", namespace)

    def job(self, name: str) -> V1Job:
        with self._cond:
            return self._find("jobs", name).model_copy(deep=True)

    def secret(self, name: str) -> V1Secret:
        with self._cond:
            return self._find("secrets", name).model_copy(deep=True)

    def pods_of(self, job_name: str) -> list[V1Pod]:
        return [
            pod
            for pod in self.pods()
            if (pod.metadata.labels or {}).get("batch.kubernetes.io/job-name") == job_name
        ]

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        with self._cond:
            return [kwargs for name, kwargs in self.calls if name == method]

    def watch_requests(self, kind: str) -> int:
        return sum(1 for kwargs in self.calls_to(f"list_{kind}") if kwargs.get("watch"))

    # -- fault injection --------------------------------------------------------------------

    def fail_next(self, method: str, status: int, reason: str = "Forbidden", message: str = "") -> None:
        """The next call of `method` raises ApiException(status) instead of doing anything."""
        with self._cond:
            self._failures.setdefault(method, []).append(_error(status, reason, message or reason))

    @contextlib.contextmanager
    def watches_held(self) -> Iterator[None]:
        """Open watches deliver nothing inside the block, as when the control plane is cut off."""
        with self._cond:
            self._held = True
        try:
            yield
        finally:
            with self._cond:
                self._held = False
                self._cond.notify_all()

    def compact(self) -> None:
        """Forget the event history, like etcd compaction: watches from an older version get 410."""
        with self._cond:
            self._compacted_rv = self._rv
            self._events.clear()
            self._cond.notify_all()

    def expire_watches(self) -> None:
        """Compact, and end every open watch with 410 Gone, as a restarting API server may."""
        with self._cond:
            self.compact()
            self._generation += 1
            self._cond.notify_all()

    # -- what happens to a phase's pod ------------------------------------------------------

    def run(self, job_name: str) -> None:
        with self._cond:
            for pod in self._pods_of(job_name):
                pod.status.phase = "Running"
                pod.status.container_statuses = [
                    self._container_status(
                        pod,
                        V1ContainerState(running=V1ContainerStateRunning(started_at=self.clock.datetime())),
                        ready=True,
                    )
                ]
                self._emit("pods", "MODIFIED", pod)

    def exit(self, job_name: str, code: int, message: str | None = None) -> None:
        """The executor container exits with `code`; the Job completes (0) or fails."""
        reason = "Completed" if code == 0 else "Error"
        self._terminate(job_name, code, reason, message)
        if code == 0:
            self._succeed_job(job_name)
        else:
            self.fail_job(job_name, "BackoffLimitExceeded", "Job has reached the specified backoff limit")

    def oom_kill(self, job_name: str) -> None:
        self._terminate(job_name, 137, "OOMKilled", None)
        self.fail_job(job_name, "BackoffLimitExceeded", "Job has reached the specified backoff limit")

    def exceed_deadline(self, job_name: str) -> None:
        """activeDeadlineSeconds passed: the Job controller fails the Job and removes its pods."""
        self.collect_pods(job_name)
        self.fail_job(job_name, "DeadlineExceeded", "Job was active longer than specified deadline")

    def evict(self, job_name: str, message: str = "The node was low on resource: memory.") -> None:
        with self._cond:
            for pod in self._pods_of(job_name):
                pod.status.phase = "Failed"
                pod.status.reason = "Evicted"
                pod.status.message = message
                pod.status.conditions = [
                    *(pod.status.conditions or []),
                    V1PodCondition(
                        type="DisruptionTarget",
                        status="True",
                        reason="TerminationByKubelet",
                        message=message,
                        last_transition_time=self.clock.datetime(),
                    ),
                ]
                pod.status.container_statuses = [
                    self._container_status(
                        pod,
                        V1ContainerState(
                            terminated=V1ContainerStateTerminated(
                                exit_code=137,
                                reason="ContainerStatusUnknown",
                                message="The container could not be located when the pod was terminated",
                            )
                        ),
                    )
                ]
                self._emit("pods", "MODIFIED", pod)
        self.fail_job(job_name, "BackoffLimitExceeded", "Job has reached the specified backoff limit")

    def image_pull_backoff(self, job_name: str, image: str | None = None) -> None:
        """The kubelet cannot pull the image; the pod stays Pending and the Job stays active."""
        with self._cond:
            for pod in self._pods_of(job_name):
                pulled = image or pod.spec.containers[0].image
                pod.status.phase = "Pending"
                pod.status.container_statuses = [
                    self._container_status(
                        pod,
                        V1ContainerState(
                            waiting=V1ContainerStateWaiting(
                                reason="ImagePullBackOff",
                                message=f'Back-off pulling image "{pulled}": ErrImagePull: manifest unknown',
                            )
                        ),
                        image=pulled,
                    )
                ]
                self._emit("pods", "MODIFIED", pod)

    def collect_pods(self, job_name: str) -> None:
        """The pods of a finished Job are gone (garbage collected, or the node was lost)."""
        with self._cond:
            for pod in self._pods_of(job_name):
                self._delete("pods", pod.metadata.namespace, pod.metadata.name, cascade=True)

    def delete_out_of_band(self, job_name: str) -> None:
        """Someone (kubectl, the TTL controller) deletes the Job and, with it, its pods and Secret."""
        with self._cond:
            job = self._find("jobs", job_name)
            self._delete("jobs", job.metadata.namespace, job_name, cascade=True)

    # -- internals --------------------------------------------------------------------------

    def _all(self, kind: str, namespace: str | None) -> list[Any]:
        with self._cond:
            return [
                obj.model_copy(deep=True)
                for (ns, _), obj in sorted(self._objects[kind].items())
                if namespace is None or ns == namespace
            ]

    def _find(self, kind: str, name: str) -> Any:
        with self._cond:
            for (_, obj_name), obj in self._objects[kind].items():
                if obj_name == name:
                    return obj
        raise KeyError(f"no {kind[:-1]} named {name}")

    def _pods_of(self, job_name: str) -> list[V1Pod]:
        return [
            pod
            for pod in self._objects["pods"].values()
            if (pod.metadata.labels or {}).get("batch.kubernetes.io/job-name") == job_name
        ]

    def _container_status(
        self, pod: V1Pod, state: V1ContainerState, ready: bool = False, image: str | None = None
    ) -> V1ContainerStatus:
        container = pod.spec.containers[0]
        return V1ContainerStatus(
            name=container.name,
            image=image or container.image,
            image_id="",
            ready=ready,
            restart_count=0,
            state=state,
        )

    def _terminate(self, job_name: str, code: int, reason: str, message: str | None) -> None:
        with self._cond:
            for pod in self._pods_of(job_name):
                pod.status.phase = "Succeeded" if code == 0 else "Failed"
                pod.status.container_statuses = [
                    self._container_status(
                        pod,
                        V1ContainerState(
                            terminated=V1ContainerStateTerminated(
                                exit_code=code,
                                reason=reason,
                                message=message,
                                finished_at=self.clock.datetime(),
                            )
                        ),
                    )
                ]
                self._emit("pods", "MODIFIED", pod)

    def fail_job(self, job_name: str, reason: str, message: str) -> None:
        with self._cond:
            job = self._find("jobs", job_name)
            now = self.clock.datetime()
            job.status.active = None
            job.status.failed = 1
            job.status.conditions = [
                V1JobCondition(
                    type=kind,
                    status="True",
                    reason=reason,
                    message=message,
                    last_probe_time=now,
                    last_transition_time=now,
                )
                for kind in ("FailureTarget", "Failed")
            ]
            self._emit("jobs", "MODIFIED", job)

    def _succeed_job(self, job_name: str) -> None:
        with self._cond:
            job = self._find("jobs", job_name)
            now = self.clock.datetime()
            job.status.active = None
            job.status.succeeded = 1
            job.status.completion_time = now
            job.status.conditions = [
                V1JobCondition(
                    type=kind,
                    status="True",
                    reason="CompletionsReached",
                    message="Reached expected number of succeeded pods",
                    last_probe_time=now,
                    last_transition_time=now,
                )
                for kind in ("SuccessCriteriaMet", "Complete")
            ]
            self._emit("jobs", "MODIFIED", job)

    def _call(self, method: str, kwargs: dict[str, Any]) -> None:
        with self._cond:
            self.calls.append((method, kwargs))
            queued = self._failures.get(method)
            if queued:
                raise queued.pop(0)

    def _emit(self, kind: str, type_: str, obj: Any) -> None:
        self._rv += 1
        obj.metadata.resource_version = str(self._rv)
        self._events.append(
            _Event(
                rv=self._rv,
                kind=kind,
                type=type_,
                namespace=obj.metadata.namespace,
                labels=dict(obj.metadata.labels or {}),
                raw=_SERIALIZER.sanitize_for_serialization(obj),
            )
        )
        self._cond.notify_all()

    def _validate(self, obj: Any) -> None:
        if self.validate_version is None:
            return
        try:
            kubernetes_validate.validate(
                _SERIALIZER.sanitize_for_serialization(obj), self.validate_version, strict=True
            )
        except kubernetes_validate.ValidationError as exc:
            raise _error(422, "Invalid", f"{'.'.join(map(str, exc.path))}: {exc.message}") from None

    def _create(self, kind: str, namespace: str, body: Any, model: type[Any]) -> Any:
        obj = model.from_dict(body) if isinstance(body, dict) else body.model_copy(deep=True)
        self._validate(obj)
        name = obj.metadata.name
        with self._cond:
            if (namespace, name) in self._objects[kind]:
                raise _error(409, "AlreadyExists", f'{kind} "{name}" already exists')
            obj.metadata.namespace = namespace
            obj.metadata.uid = str(uuid.uuid4())
            obj.metadata.creation_timestamp = self.clock.datetime()
            self._objects[kind][(namespace, name)] = obj
            self._emit(kind, "ADDED", obj)
            return obj

    def _get(self, kind: str, namespace: str, name: str) -> Any:
        with self._cond:
            obj = self._objects[kind].get((namespace, name))
            if obj is None:
                raise _error(404, "NotFound", f'{kind} "{name}" not found')
            return obj

    def _delete(self, kind: str, namespace: str, name: str, cascade: bool) -> None:
        with self._cond:
            obj = self._get(kind, namespace, name)
            del self._objects[kind][(namespace, name)]
            self._emit(kind, "DELETED", obj)
            if not cascade:
                return
            # The garbage collector: dependents go with their owner.
            uid = obj.metadata.uid
            for dep_kind in self.KINDS:
                for (dep_ns, dep_name), dep in list(self._objects[dep_kind].items()):
                    owners = dep.metadata.owner_references or []
                    if any(owner.uid == uid for owner in owners):
                        self._delete(dep_kind, dep_ns, dep_name, cascade=True)

    def _list(self, kind: str, namespace: str, label_selector: str | None) -> tuple[list[Any], str]:
        with self._cond:
            items = [
                obj.model_copy(deep=True)
                for (ns, _), obj in sorted(self._objects[kind].items())
                if ns == namespace and _matches(label_selector, obj.metadata.labels)
            ]
            return items, str(self._rv)

    def _start_pod(self, job: V1Job) -> None:
        template = job.spec.template
        name = f"{job.metadata.name}-{secrets.token_hex(3)[:5]}"
        pod_labels = {
            **(template.metadata.labels or {}),
            "batch.kubernetes.io/job-name": job.metadata.name,
            "job-name": job.metadata.name,
            "batch.kubernetes.io/controller-uid": job.metadata.uid,
            "controller-uid": job.metadata.uid,
        }
        pod = V1Pod(
            api_version="v1",
            kind="Pod",
            metadata=V1ObjectMeta(
                name=name,
                namespace=job.metadata.namespace,
                uid=str(uuid.uuid4()),
                creation_timestamp=self.clock.datetime(),
                labels=pod_labels,
                annotations=dict(template.metadata.annotations or {}),
                owner_references=[
                    V1OwnerReference(
                        api_version="batch/v1",
                        kind="Job",
                        name=job.metadata.name,
                        uid=job.metadata.uid,
                        controller=True,
                        block_owner_deletion=True,
                    )
                ],
            ),
            spec=template.spec.model_copy(deep=True),
            status=V1PodStatus(
                phase="Pending",
                conditions=[V1PodCondition(type="PodScheduled", status="True")],
            ),
        )
        pod.status.container_statuses = [
            self._container_status(
                pod, V1ContainerState(waiting=V1ContainerStateWaiting(reason="ContainerCreating"))
            )
        ]
        self._objects["pods"][(pod.metadata.namespace, name)] = pod
        self._emit("pods", "ADDED", pod)
        job.status.active = 1
        job.status.start_time = self.clock.datetime()
        self._emit("jobs", "MODIFIED", job)

    def _watch(
        self,
        kind: str,
        namespace: str,
        label_selector: str | None,
        resource_version: str | None,
        timeout_seconds: int | None,
    ) -> _WatchResponse:
        return _WatchResponse(self, kind, namespace, label_selector, resource_version, timeout_seconds)


class _Socket:
    def __init__(self, response: _WatchResponse) -> None:
        self._response = response

    def shutdown(self, how: int) -> None:
        self._response.close()


class _Connection:
    def __init__(self, response: _WatchResponse) -> None:
        self.sock = _Socket(response)


class _WatchResponse:
    """What `list_…(watch=True, _preload_content=False)` returns: a streaming HTTP response."""

    status = 200

    def __init__(
        self,
        fake: FakeKube,
        kind: str,
        namespace: str,
        label_selector: str | None,
        resource_version: str | None,
        timeout_seconds: int | None,
    ) -> None:
        self._fake = fake
        self._kind = kind
        self._namespace = namespace
        self._selector = label_selector
        self._since = int(resource_version) if resource_version else None
        self._deadline = time.monotonic() + timeout_seconds if timeout_seconds else float("inf")
        self._closed = False
        self._generation = fake._generation
        self.connection = _Connection(self)

    def close(self) -> None:
        with self._fake._cond:
            self._closed = True
            self._fake._cond.notify_all()

    def release_conn(self) -> None:
        pass

    def _line(self, type_: str, raw: dict[str, Any]) -> bytes:
        return (json.dumps({"type": type_, "object": raw}) + "\n").encode()

    def stream(self, amt: int | None = None, decode_content: bool = False) -> Iterator[bytes]:
        fake = self._fake
        with fake._cond:
            if self._since is None:
                # No resourceVersion: the server first sends every existing object as ADDED.
                items, rv = fake._list(self._kind, self._namespace, self._selector)
                initial = [self._line("ADDED", _SERIALIZER.sanitize_for_serialization(o)) for o in items]
                self._since = int(rv)
            else:
                initial = []
        yield from initial
        while True:
            with fake._cond:
                while True:
                    if self._closed:
                        return
                    if self._since < fake._compacted_rv or self._generation != fake._generation:
                        gone = {
                            "kind": "Status",
                            "apiVersion": "v1",
                            "metadata": {},
                            "status": "Failure",
                            "message": f"too old resource version: {self._since}",
                            "reason": "Expired",
                            "code": 410,
                        }
                        chunk = [self._line("ERROR", gone)]
                        self._closed = True
                        break
                    pending = (
                        []
                        if fake._held
                        else [
                            event
                            for event in fake._events
                            if event.rv > self._since
                            and event.kind == self._kind
                            and event.namespace == self._namespace
                            and _matches(self._selector, event.labels)
                        ]
                    )
                    if pending:
                        self._since = pending[-1].rv
                        chunk = [self._line(event.type, event.raw) for event in pending]
                        break
                    remaining = self._deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    fake._cond.wait(min(remaining, 0.2))
            yield from chunk


class FakeBatchV1Api:
    def __init__(self, fake: FakeKube) -> None:
        self._fake = fake

    def create_namespaced_job(self, namespace: str, body: V1Job | dict[str, Any], **kwargs: Any) -> V1Job:
        fake = self._fake
        fake._call("create_namespaced_job", {"namespace": namespace, "body": body, **kwargs})
        with fake._cond:
            job = fake._create("jobs", namespace, body, V1Job)
            job.status = V1JobStatus(active=0)
            fake._start_pod(job)
            return job.model_copy(deep=True)

    def read_namespaced_job(self, name: str, namespace: str, **kwargs: Any) -> V1Job:
        self._fake._call("read_namespaced_job", {"name": name, "namespace": namespace, **kwargs})
        return self._fake._get("jobs", namespace, name).model_copy(deep=True)

    def list_namespaced_job(
        self,
        namespace: str,
        label_selector: str | None = None,
        watch: bool | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        **kwargs: Any,
    ) -> V1JobList:
        self._fake._call(
            "list_jobs",
            {
                "namespace": namespace,
                "label_selector": label_selector,
                "watch": watch,
                "resource_version": resource_version,
                **kwargs,
            },
        )
        if watch:
            return self._fake._watch("jobs", namespace, label_selector, resource_version, timeout_seconds)  # type: ignore[return-value]
        items, rv = self._fake._list("jobs", namespace, label_selector)
        return V1JobList(
            api_version="batch/v1", kind="JobList", items=items, metadata=V1ListMeta(resource_version=rv)
        )

    def delete_namespaced_job(
        self,
        name: str,
        namespace: str,
        propagation_policy: str | None = None,
        body: Any = None,
        **kwargs: Any,
    ) -> V1Status:
        fake = self._fake
        fake._call(
            "delete_namespaced_job",
            {"name": name, "namespace": namespace, "propagation_policy": propagation_policy, **kwargs},
        )
        policy = propagation_policy or (getattr(body, "propagation_policy", None) if body else None)
        # The API's default for Jobs is "orphan": the pods would stay. The launcher must say otherwise.
        fake._delete("jobs", namespace, name, cascade=policy in ("Background", "Foreground"))
        return V1Status(api_version="v1", kind="Status", status="Success")


class FakeCoreV1Api:
    def __init__(self, fake: FakeKube) -> None:
        self._fake = fake

    def create_namespaced_secret(
        self, namespace: str, body: V1Secret | dict[str, Any], **kwargs: Any
    ) -> V1Secret:
        self._fake._call("create_namespaced_secret", {"namespace": namespace, "body": body, **kwargs})
        return self._fake._create("secrets", namespace, body, V1Secret).model_copy(deep=True)

    def read_namespaced_secret(self, name: str, namespace: str, **kwargs: Any) -> V1Secret:
        self._fake._call("read_namespaced_secret", {"name": name, "namespace": namespace, **kwargs})
        return self._fake._get("secrets", namespace, name).model_copy(deep=True)

    def patch_namespaced_secret(self, name: str, namespace: str, body: Any, **kwargs: Any) -> V1Secret:
        """A strategic merge patch of metadata (labels, annotations, ownerReferences merged by uid)."""
        fake = self._fake
        fake._call("patch_namespaced_secret", {"name": name, "namespace": namespace, "body": body, **kwargs})
        with fake._cond:
            secret = fake._get("secrets", namespace, name)
            patch = body if isinstance(body, dict) else _SERIALIZER.sanitize_for_serialization(body)
            if set(patch) - {"metadata"}:
                if secret.immutable:
                    raise _error(422, "Invalid", "field is immutable when `immutable` is set")
            meta = patch.get("metadata", {})
            for key in ("labels", "annotations"):
                if key in meta:
                    merged = {**(getattr(secret.metadata, key) or {}), **meta[key]}
                    setattr(secret.metadata, key, merged)
            if "ownerReferences" in meta:
                owners = {owner.uid: owner for owner in secret.metadata.owner_references or []}
                for raw in meta["ownerReferences"]:
                    owner = V1OwnerReference.from_dict(raw)
                    owners[owner.uid] = owner
                secret.metadata.owner_references = list(owners.values())
            fake._validate(secret)
            fake._emit("secrets", "MODIFIED", secret)
            return secret.model_copy(deep=True)

    def delete_namespaced_secret(self, name: str, namespace: str, **kwargs: Any) -> V1Status:
        self._fake._call("delete_namespaced_secret", {"name": name, "namespace": namespace, **kwargs})
        self._fake._delete("secrets", namespace, name, cascade=True)
        return V1Status(api_version="v1", kind="Status", status="Success")

    def list_namespaced_secret(
        self, namespace: str, label_selector: str | None = None, **kwargs: Any
    ) -> V1SecretList:
        self._fake._call("list_secrets", {"namespace": namespace, "label_selector": label_selector, **kwargs})
        items, rv = self._fake._list("secrets", namespace, label_selector)
        return V1SecretList(
            api_version="v1", kind="SecretList", items=items, metadata=V1ListMeta(resource_version=rv)
        )

    def list_namespaced_pod(
        self,
        namespace: str,
        label_selector: str | None = None,
        watch: bool | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        **kwargs: Any,
    ) -> V1PodList:
        self._fake._call(
            "list_pods",
            {
                "namespace": namespace,
                "label_selector": label_selector,
                "watch": watch,
                "resource_version": resource_version,
                **kwargs,
            },
        )
        if watch:
            return self._fake._watch("pods", namespace, label_selector, resource_version, timeout_seconds)  # type: ignore[return-value]
        items, rv = self._fake._list("pods", namespace, label_selector)
        return V1PodList(
            api_version="v1", kind="PodList", items=items, metadata=V1ListMeta(resource_version=rv)
        )
