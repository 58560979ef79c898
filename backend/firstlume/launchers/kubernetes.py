"""The Kubernetes launcher: one Job per run phase, watched, with the reason a Job failed.

Three parts: this module keeps the launcher contract (launchers/base.py); kubernetes_watch.py
lists and watches Jobs and pods; kubernetes_failures.py says, purely, why a Job or pod is dead.
The official client is synchronous, so every call goes through a thread. The API objects are
injected (`batch_api`, `core_api`), so tests drive the launcher against an in-memory stand-in.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from kubernetes import watch as kube_watch
from kubernetes.client import V1Job, V1Pod, V1Secret
from kubernetes.client.exceptions import ApiException

from firstlume.launchers import manifests
from firstlume.launchers.base import DeathCallback, ExecutorDied, PhaseLaunch, PhaseRef
from firstlume.launchers.kubernetes_failures import (
    api_message,
    failure_reason,
    job_failed,
    job_succeeded,
    stuck_reason,
)
from firstlume.launchers.kubernetes_watch import ListWatch
from firstlume.settings import KubernetesSettings, Settings

log = logging.getLogger(__name__)


class KubernetesLaunchError(RuntimeError):
    """The Job of a phase could not be created; the message is safe to show as the run's error."""


def _timestamp(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


class KubernetesLauncher:
    """Launches each run phase as a Job and reports the ones that die (see launchers/base.py)."""

    def __init__(
        self,
        config: KubernetesSettings,
        *,
        batch_api: Any,
        core_api: Any,
        watch_factory: Callable[[], Any] = kube_watch.Watch,
        clock: Callable[[], float] = time.time,
        retry_delay: float = 5.0,
    ) -> None:
        self.config = config
        self._batch = batch_api
        self._core = core_api
        self._watch_factory = watch_factory
        self._clock = clock
        self._retry_delay = retry_delay
        self._on_death: DeathCallback | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._watches: list[ListWatch] = []
        self._pool: ThreadPoolExecutor | None = None
        # Phases already reported to on_death by the watcher (insertion-ordered, bounded).
        self._reported: dict[PhaseRef, None] = {}
        # Phases whose Job this process created, with the sequence number of that moment: if
        # such a Job is missing from a list taken afterwards, someone deleted it.
        self._launched: dict[PhaseRef, int] = {}
        self._sequence = 0
        # When check_health first found no Job for a running phase.
        self._missing_since: dict[PhaseRef, float] = {}
        self._last_pass: float | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> KubernetesLauncher:
        """The launcher of `firstlume serve`: its FIRSTLUME_K8S_* settings."""
        return cls.from_config(settings.k8s)

    @classmethod
    def from_config(cls, config: KubernetesSettings) -> KubernetesLauncher:
        """Build the API clients from a kubeconfig (FIRSTLUME_K8S_KUBECONFIG) or the pod's service account."""
        from kubernetes import client as kube_client
        from kubernetes import config as kube_config

        if config.kubeconfig:
            api_client = kube_config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=config.kubeconfig, context=config.context, persist_config=False
            )
        else:
            configuration = kube_client.Configuration()
            kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            api_client = kube_client.ApiClient(configuration)
        return cls(
            config,
            batch_api=kube_client.BatchV1Api(api_client),
            core_api=kube_client.CoreV1Api(api_client),
        )

    # -- contract ---------------------------------------------------------------------------

    async def start(self, on_death: DeathCallback) -> None:
        if self._tasks:
            raise RuntimeError("the Kubernetes launcher is already started")
        self._on_death = on_death
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="firstlume-k8s-watch")
        self._watches = [
            self._list_watch("jobs", self._batch.list_namespaced_job, self._on_job),
            self._list_watch("pods", self._core.list_namespaced_pod, self._on_pod),
        ]
        self._tasks = [asyncio.create_task(watch.run(self._pool)) for watch in self._watches]

    async def launch(self, launch: PhaseLaunch) -> None:
        ns = self.config.namespace
        ref = manifests.ref_of_launch(launch)
        job_name = manifests.job_name(launch.run_id, launch.phase, launch.attempt)
        secret_name = manifests.secret_name(launch.run_id, launch.phase, launch.attempt)
        await self._ensure_token_secret(launch, secret_name)
        body = V1Job.from_dict(manifests.job(self.config, launch))
        try:
            job = await asyncio.to_thread(self._batch.create_namespaced_job, ns, body)
        except ApiException as exc:
            if exc.status != 409:
                await self._delete_quietly(self._core.delete_namespaced_secret, secret_name)
                raise KubernetesLaunchError(
                    f"could not create the executor Job {job_name} in namespace {ns}: {api_message(exc)}"
                ) from None
            # Launched before (a retry of the same attempt): keep that Job.
            job = await asyncio.to_thread(self._batch.read_namespaced_job, job_name, ns)
        try:
            await asyncio.to_thread(
                self._core.patch_namespaced_secret,
                secret_name,
                ns,
                manifests.secret_owner_patch(job_name, job.metadata.uid),
            )
        except ApiException as exc:
            # The phase runs anyway; the Secret then waits for orphan cleanup instead of the GC.
            log.warning("could not make Job %s the owner of its token Secret: %s", job_name, api_message(exc))
        self._sequence += 1
        self._launched[ref] = self._sequence
        self._missing_since.pop(ref, None)
        log.info("launched Job %s in namespace %s", job_name, ns)

    async def check_health(self, active: list[PhaseRef]) -> list[ExecutorDied]:
        """Report running phases whose Job failed, vanished or is stuck; then delete orphans.

        The watcher reports failures as they happen; this pass is the safety net (a restart, a
        missed event, a deleted Job), so it lists at most once per health_check_interval."""
        now = self._clock()
        interval = self.config.health_check_interval_seconds
        if self._last_pass is not None and now - self._last_pass < interval:
            return []
        self._last_pass = now
        wanted = set(active)
        for ref in set(self._missing_since) - wanted:
            del self._missing_since[ref]
        selector = manifests.instance_selector(self.config)
        listed_after = self._sequence
        try:
            jobs = await self._list(self._batch.list_namespaced_job, selector)
            pods = await self._list(self._core.list_namespaced_pod, selector) if wanted else []
        except ApiException as exc:
            log.warning("cannot check executor Jobs: %s", api_message(exc))
            return []
        jobs_by_ref = self._by_ref(jobs)
        for ref, seen in list(self._launched.items()):
            # Jobs the TTL controller removed after their phase ended need no memory.
            if seen <= listed_after and ref not in wanted and ref not in jobs_by_ref:
                del self._launched[ref]
        pods_by_ref: dict[PhaseRef, list[V1Pod]] = {}
        for pod in pods:
            if (pod_ref := self._ref(pod)) is not None:
                pods_by_ref.setdefault(pod_ref, []).append(pod)
        grace = self.config.launch_grace_seconds
        dead: list[ExecutorDied] = []
        for ref in active:
            job = jobs_by_ref.get(ref)
            if job is None:
                if reason := self._missing(ref, now, listed_after):
                    dead.append(ExecutorDied(ref=ref, reason=reason))
                continue
            self._missing_since.pop(ref, None)
            own_pods = pods_by_ref.get(ref, [])
            if job_failed(job):
                dead.append(
                    ExecutorDied(ref=ref, reason=failure_reason(job, own_pods) or "the executor Job failed")
                )
            elif job.metadata.deletion_timestamp is not None:
                dead.append(ExecutorDied(ref=ref, reason=f"the executor Job {job.metadata.name} was deleted"))
            elif job_succeeded(job):
                finished = _timestamp(job.status.completion_time) if job.status else None
                # The executor reports its result before it exits; give that report time to land.
                if finished is None or now - finished >= grace:
                    dead.append(
                        ExecutorDied(ref=ref, reason="the executor exited without reporting its result")
                    )
            elif (reason := stuck_reason(own_pods)) and self._stuck_long_enough(own_pods, now):
                dead.append(ExecutorDied(ref=ref, reason=reason))
        try:
            await self._delete_orphans(active, jobs)
        except Exception:
            log.exception("could not delete orphan executor Jobs")
        return dead

    async def cleanup(self, ref: PhaseRef) -> None:
        job_name = manifests.job_name(ref.run_id, ref.phase, ref.attempt)
        await self._delete_quietly(self._delete_job, job_name)
        await self._delete_quietly(
            self._core.delete_namespaced_secret, manifests.secret_name(ref.run_id, ref.phase, ref.attempt)
        )
        self._forget(ref)

    async def cancel(self, run_id: str) -> None:
        selector = manifests.run_selector(self.config, run_id)
        for job in await self._list(self._batch.list_namespaced_job, selector):
            await self._delete_quietly(self._delete_job, job.metadata.name)
            log.info("deleted Job %s of canceled run %s", job.metadata.name, run_id)
        for secret in await self._list(self._core.list_namespaced_secret, selector):
            await self._delete_quietly(self._core.delete_namespaced_secret, secret.metadata.name)
        for ref in [
            r for r in (*self._launched, *self._reported, *self._missing_since) if r.run_id == run_id
        ]:
            self._forget(ref)

    async def delete_orphans(self, active: list[PhaseRef]) -> list[str]:
        """Delete Jobs and token Secrets of phases that are not running, and return their names.

        check_health does this on each pass. Objects younger than the launch grace are spared:
        another replica may have launched a phase after `active` was read."""
        return await self._delete_orphans(active, None)

    async def _delete_orphans(self, active: list[PhaseRef], jobs: list[Any] | None) -> list[str]:
        wanted = set(active)
        selector = manifests.instance_selector(self.config)
        now = self._clock()
        if jobs is None:
            jobs = await self._list(self._batch.list_namespaced_job, selector)
        secrets = await self._list(self._core.list_namespaced_secret, selector)
        deleted: list[str] = []
        for kind, objects, deleter in (
            ("Job", jobs, self._delete_job),
            ("Secret", secrets, self._core.delete_namespaced_secret),
        ):
            for obj in objects:
                ref = self._ref(obj)
                created = _timestamp(obj.metadata.creation_timestamp)
                if ref in wanted or (
                    created is not None and now - created < self.config.launch_grace_seconds
                ):
                    continue
                await self._delete_quietly(deleter, obj.metadata.name)
                deleted.append(obj.metadata.name)
                log.info("deleted orphan %s %s", kind, obj.metadata.name)
                if ref is not None and kind == "Job":
                    self._forget(ref)
        return deleted

    async def close(self) -> list[ExecutorDied]:
        for watch in self._watches:
            watch.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks, self._watches = [], []
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        # Jobs run on without the control plane; the next one to start watches them again.
        return []

    # -- reacting to what the watches see -----------------------------------------------------

    async def _on_job(self, job: V1Job) -> None:
        ref = self._ref(job)
        if ref is None or ref in self._reported or not job_failed(job):
            return
        pods = await self._list(self._core.list_namespaced_pod, manifests.phase_selector(self.config, ref))
        await self._report(
            ExecutorDied(ref=ref, reason=failure_reason(job, pods) or "the executor Job failed")
        )

    async def _on_pod(self, pod: V1Pod) -> None:
        ref = self._ref(pod)
        if ref is None or ref in self._reported:
            return
        reason = stuck_reason([pod])
        if reason and self._stuck_long_enough([pod], self._clock()):
            await self._report(ExecutorDied(ref=ref, reason=reason))

    async def _report(self, death: ExecutorDied) -> None:
        if self._on_death is None:
            return
        self._reported[death.ref] = None
        while len(self._reported) > 10_000:
            del self._reported[next(iter(self._reported))]
        log.info("executor of run %s phase %s died: %s", death.ref.run_id, death.ref.phase, death.reason)
        try:
            await self._on_death(death)
        except Exception:
            # Forget it, so the next event or list reports it again.
            self._reported.pop(death.ref, None)
            log.exception("the death callback failed for run %s", death.ref.run_id)

    def _list_watch(
        self, kind: str, list_fn: Callable[..., Any], handle: Callable[[Any], Awaitable[None]]
    ) -> ListWatch:
        return ListWatch(
            kind,
            list_fn,
            handle,
            namespace=self.config.namespace,
            selector=manifests.instance_selector(self.config),
            watch_factory=self._watch_factory,
            timeout_seconds=self.config.watch_timeout_seconds,
            retry_delay=self._retry_delay,
        )

    # -- helpers ------------------------------------------------------------------------------

    def _missing(self, ref: PhaseRef, now: float, listed_after: int) -> str | None:
        """Why a running phase without a Job is dead, or None while it may just not be there yet.

        A phase is marked running before its Job is created, possibly by another replica, so a
        missing Job only counts once it stayed missing for the launch grace; unless this process
        created before the list was taken, in which case someone deleted it."""
        if self._launched.get(ref, listed_after + 1) <= listed_after:
            del self._launched[ref]
            return "the executor Job was deleted before the phase finished"
        since = self._missing_since.setdefault(ref, now)
        if now - since < self.config.launch_grace_seconds:
            return None
        self._missing_since.pop(ref, None)
        return (
            "no executor Job exists for this phase (it was never created, or deleted, "
            f"for at least {self.config.launch_grace_seconds:g} s)"
        )

    def _stuck_long_enough(self, pods: list[V1Pod], now: float) -> bool:
        created = [_timestamp(pod.metadata.creation_timestamp) for pod in pods if pod.metadata]
        oldest = min((stamp for stamp in created if stamp is not None), default=None)
        return oldest is None or now - oldest >= self.config.image_pull_grace_seconds

    def _ref(self, obj: Any) -> PhaseRef | None:
        meta = obj.metadata
        return manifests.ref_of(meta.labels, meta.annotations) if meta else None

    def _by_ref(self, jobs: list[Any]) -> dict[PhaseRef, Any]:
        found: dict[PhaseRef, Any] = {}
        for job in jobs:
            if (ref := self._ref(job)) is not None:
                found[ref] = job
        return found

    def _forget(self, ref: PhaseRef) -> None:
        self._launched.pop(ref, None)
        self._missing_since.pop(ref, None)
        self._reported.pop(ref, None)

    async def _list(self, list_fn: Callable[..., Any], selector: str) -> list[Any]:
        result = await asyncio.to_thread(list_fn, self.config.namespace, label_selector=selector)
        return list(result.items or [])

    def _delete_job(self, name: str, namespace: str) -> Any:
        # Background propagation: the Job goes now, the garbage collector takes its pods and Secret.
        return self._batch.delete_namespaced_job(name, namespace, propagation_policy="Background")

    async def _delete_quietly(self, delete: Callable[[str, str], Any], name: str) -> None:
        try:
            await asyncio.to_thread(delete, name, self.config.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

    async def _ensure_token_secret(self, launch: PhaseLaunch, name: str) -> None:
        ns = self.config.namespace
        body = V1Secret.from_dict(manifests.token_secret(self.config, launch))
        for _ in range(2):
            try:
                await asyncio.to_thread(self._core.create_namespaced_secret, ns, body)
                return
            except ApiException as exc:
                if exc.status != 409:
                    # Never the body: an error about a Secret could echo its data.
                    raise KubernetesLaunchError(
                        f"could not create the token Secret {name} in namespace {ns}: "
                        f"{exc.status} {exc.reason}"
                    ) from None
            existing = await asyncio.to_thread(self._core.read_namespaced_secret, name, ns)
            stored = base64.b64decode((existing.data or {}).get(manifests.TOKEN_KEY, ""))
            if hmac.compare_digest(stored, launch.token.encode()):
                return
            # The Secret is immutable: a new token for the same attempt means a new Secret.
            await self._delete_quietly(self._core.delete_namespaced_secret, name)
        raise KubernetesLaunchError(f"could not replace the token Secret {name} in namespace {ns}")
