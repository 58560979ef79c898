"""The Kubernetes launcher and its watcher, against an in-memory API that speaks the client's models."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from kubernetes.client import V1Job

from firstlume.launchers import manifests
from firstlume.launchers.base import ExecutorDied, PhaseLaunch, PhaseRef
from firstlume.launchers.kubernetes import KubernetesLauncher, KubernetesLaunchError
from firstlume.launchers.kubernetes_failures import failure_reason
from firstlume.settings import KubernetesSettings
from support.fake_kube import FakeClock, FakeKube
from support.waiting import until

NAMESPACE = "firstlume-runs"
TOKEN = "flx_secret_phase_token"
TIMEOUT = 10.0


def make_config(**overrides: object) -> KubernetesSettings:
    settings: dict[str, object] = {
        "image": "registry.example/firstlume:1.0",
        "namespace": NAMESPACE,
        "watch_timeout_seconds": 3,
        "health_check_interval_seconds": 0,
        "launch_grace_seconds": 120,
        "image_pull_grace_seconds": 120,
        **overrides,
    }
    return KubernetesSettings(**settings)  # type: ignore[arg-type]


def phase(run_id: str = "run-1", name: str = "plan", attempt: int = 1, token: str = TOKEN) -> PhaseLaunch:
    return PhaseLaunch(
        run_id=run_id,
        phase=name,
        attempt=attempt,
        token=token,
        control_plane_url="http://firstlume:8000",
        org_slug="acme",
        stack_slug="network",
    )


def ref(launch: PhaseLaunch) -> PhaseRef:
    return PhaseRef(launch.run_id, launch.phase, launch.attempt)


def job_name(launch: PhaseLaunch) -> str:
    return manifests.job_name(launch.run_id, launch.phase, launch.attempt)


class Deaths:
    """The DeathCallback the scheduler would pass, recording what it is told."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[ExecutorDied] = asyncio.Queue()

    async def __call__(self, died: ExecutorDied) -> None:
        await self.queue.put(died)

    async def next(self) -> ExecutorDied:
        return await asyncio.wait_for(self.queue.get(), timeout=TIMEOUT)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def kube(clock: FakeClock) -> FakeKube:
    return FakeKube(clock)


def new_launcher(kube: FakeKube, clock: FakeClock, **overrides: object) -> KubernetesLauncher:
    return KubernetesLauncher(
        make_config(**overrides), batch_api=kube.batch, core_api=kube.core, clock=clock, retry_delay=0.05
    )


@pytest.fixture
async def launcher(kube: FakeKube, clock: FakeClock) -> AsyncIterator[KubernetesLauncher]:
    launcher = new_launcher(kube, clock)
    yield launcher
    await launcher.close()


@pytest.fixture
async def deaths(launcher: KubernetesLauncher, kube: FakeKube) -> Deaths:
    deaths = Deaths()
    await launcher.start(deaths)
    await until(lambda: kube.watch_requests("jobs") > 0, TIMEOUT, "the Job watch")
    return deaths


# -- launching -----------------------------------------------------------------------------


async def test_launch_creates_the_job_and_a_token_secret_owned_by_it(
    launcher: KubernetesLauncher, kube: FakeKube
) -> None:
    launch = phase()
    await launcher.launch(launch)
    (job,) = kube.jobs(NAMESPACE)
    (secret,) = kube.secrets(NAMESPACE)
    assert job.metadata.name == job_name(launch)
    assert secret.metadata.name == manifests.secret_name(launch.run_id, "plan", 1)
    (owner,) = secret.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid) == ("Job", job.metadata.name, job.metadata.uid)
    assert TOKEN not in job.to_json()
    (env,) = [e for e in job.spec.template.spec.containers[0].env if e.name == "FIRSTLUME_EXECUTOR_TOKEN"]
    assert env.value is None and env.value_from.secret_key_ref.name == secret.metadata.name


async def test_the_token_secret_dies_with_its_job(launcher: KubernetesLauncher, kube: FakeKube) -> None:
    launch = phase()
    await launcher.launch(launch)
    kube.delete_out_of_band(job_name(launch))
    assert kube.jobs() == [] and kube.secrets() == [] and kube.pods() == []


async def test_launching_the_same_attempt_twice_keeps_one_job(
    launcher: KubernetesLauncher, kube: FakeKube
) -> None:
    await launcher.launch(phase())
    await launcher.launch(phase())
    assert len(kube.jobs()) == 1 and len(kube.secrets()) == 1 and len(kube.pods()) == 1


async def test_relaunch_with_a_new_token_replaces_the_immutable_secret(
    launcher: KubernetesLauncher, kube: FakeKube
) -> None:
    await launcher.launch(phase(token="first"))
    await launcher.launch(phase(token="second"))
    (secret,) = kube.secrets()
    assert secret.data[manifests.TOKEN_KEY] == "c2Vjb25k"  # base64("second")
    assert secret.metadata.owner_references[0].uid == kube.jobs()[0].metadata.uid


async def test_a_refused_job_raises_and_leaves_no_secret(
    launcher: KubernetesLauncher, kube: FakeKube
) -> None:
    kube.fail_next(
        "create_namespaced_job", 403, "Forbidden", 'jobs.batch is forbidden: exceeded quota "runs"'
    )
    with pytest.raises(KubernetesLaunchError, match="exceeded quota") as raised:
        await launcher.launch(phase())
    assert TOKEN not in str(raised.value)
    assert kube.jobs() == [] and kube.secrets() == []


# -- failures reported by the watcher --------------------------------------------------------


async def test_an_oom_killed_pod_fails_the_run_with_out_of_memory(
    launcher: KubernetesLauncher, deaths: Deaths, kube: FakeKube
) -> None:
    launch = phase()
    await launcher.launch(launch)
    kube.run(job_name(launch))
    kube.oom_kill(job_name(launch))
    died = await deaths.next()
    assert died.ref == ref(launch)
    assert "out of memory" in died.reason and "OOMKilled" in died.reason and "2Gi" in died.reason


async def test_a_deadline_exceeded_job_says_so(
    launcher: KubernetesLauncher, deaths: Deaths, kube: FakeKube
) -> None:
    launch = phase()
    await launcher.launch(launch)
    kube.run(job_name(launch))
    kube.exceed_deadline(job_name(launch))
    died = await deaths.next()
    assert died.reason.startswith("deadline exceeded")
    assert "10800 s" in died.reason


async def test_an_evicted_pod_gives_the_nodes_message(
    launcher: KubernetesLauncher, deaths: Deaths, kube: FakeKube
) -> None:
    launch = phase()
    await launcher.launch(launch)
    kube.run(job_name(launch))
    kube.evict(job_name(launch), "The node was low on resource: ephemeral-storage.")
    died = await deaths.next()
    assert died.reason == "evicted: The node was low on resource: ephemeral-storage."


async def test_an_image_that_cannot_be_pulled_fails_the_run_once_the_grace_is_over(
    launcher: KubernetesLauncher, deaths: Deaths, kube: FakeKube, clock: FakeClock
) -> None:
    launch = phase()
    await launcher.launch(launch)
    kube.image_pull_backoff(job_name(launch), "registry.example/firstlume:typo")
    assert await launcher.check_health([ref(launch)]) == []  # the kubelet may still get it
    clock.advance(121)
    kube.image_pull_backoff(job_name(launch), "registry.example/firstlume:typo")  # the next back-off
    died = await deaths.next()
    assert died.reason.startswith("image pull failure")
    assert "registry.example/firstlume:typo" in died.reason and "ImagePullBackOff" in died.reason


async def test_a_non_zero_exit_gives_the_exit_code(
    launcher: KubernetesLauncher, deaths: Deaths, kube: FakeKube
) -> None:
    launch = phase()
    await launcher.launch(launch)
    kube.run(job_name(launch))
    kube.exit(job_name(launch), 3, "cannot reach the control plane")
    died = await deaths.next()
    assert died.reason == "the executor exited with exit code 3: cannot reach the control plane"


async def test_a_successful_exit_is_not_a_death(
    launcher: KubernetesLauncher, deaths: Deaths, kube: FakeKube
) -> None:
    ok, failing = phase("run-ok"), phase("run-bad")
    await launcher.launch(ok)
    await launcher.launch(failing)
    kube.exit(job_name(ok), 0)
    kube.exit(job_name(failing), 1)
    died = await deaths.next()
    assert died.ref == ref(failing)
    assert deaths.queue.empty()


async def test_each_failure_is_reported_once_even_when_listed_again(
    launcher: KubernetesLauncher, deaths: Deaths, kube: FakeKube
) -> None:
    launch = phase()
    await launcher.launch(launch)
    kube.oom_kill(job_name(launch))
    await deaths.next()
    lists_before = len([c for c in kube.calls_to("list_jobs") if not c["watch"]])
    kube.expire_watches()  # the watch gets 410 Gone and lists everything again
    await until(
        lambda: len([c for c in kube.calls_to("list_jobs") if not c["watch"]]) > lists_before,
        TIMEOUT,
        "the new list",
    )
    await until(lambda: kube.watch_requests("jobs") >= 2, TIMEOUT, "the watch after the list")
    assert deaths.queue.empty()


async def test_a_failure_missed_by_an_expired_watch_is_found_by_listing_again(
    launcher: KubernetesLauncher, deaths: Deaths, kube: FakeKube
) -> None:
    launch = phase()
    await launcher.launch(launch)
    with kube.watches_held():
        kube.exit(job_name(launch), 2)
        kube.compact()  # the event is gone from history: resuming the watch answers 410
    died = await deaths.next()
    assert died.reason == "the executor exited with exit code 2"


async def test_a_failure_while_the_control_plane_was_down_is_found_after_restart(
    kube: FakeKube, clock: FakeClock
) -> None:
    launch = phase()
    before = new_launcher(kube, clock)
    await before.start(Deaths())
    await before.launch(launch)
    await before.close()

    kube.oom_kill(job_name(launch))  # nobody is watching
    kube.compact()

    after = new_launcher(kube, clock)
    assert [d.reason for d in await after.check_health([ref(launch)])] == [
        "out of memory: the executor was killed (OOMKilled) for exceeding its memory limit of 2Gi; "
        "raise FIRSTLUME_K8S_MEMORY_LIMIT"
    ]
    deaths = Deaths()
    await after.start(deaths)
    try:
        died = await deaths.next()
        assert died.ref == ref(launch) and "out of memory" in died.reason
    finally:
        await after.close()


async def test_a_failing_death_callback_is_retried_on_the_next_event(
    launcher: KubernetesLauncher, kube: FakeKube
) -> None:
    calls: list[ExecutorDied] = []

    async def flaky(died: ExecutorDied) -> None:
        calls.append(died)
        if len(calls) == 1:
            raise RuntimeError("database is down")

    await launcher.start(flaky)
    launch = phase()
    await launcher.launch(launch)
    kube.oom_kill(job_name(launch))
    await until(lambda: len(calls) == 1, TIMEOUT, "the first report")
    kube.expire_watches()  # the list after 410 Gone sees the failed Job again
    await until(lambda: len(calls) == 2, TIMEOUT, "the second report")


async def test_close_stops_the_watch_promptly(launcher: KubernetesLauncher, deaths: Deaths) -> None:
    await asyncio.wait_for(launcher.close(), timeout=2)


# -- check_health ----------------------------------------------------------------------------


async def test_a_just_launched_phase_without_a_visible_job_is_spared_for_the_grace(
    launcher: KubernetesLauncher, clock: FakeClock
) -> None:
    # Another replica marked the phase running and is about to create its Job.
    running = PhaseRef("run-elsewhere", "plan", 1)
    assert await launcher.check_health([running]) == []
    clock.advance(119)
    assert await launcher.check_health([running]) == []
    clock.advance(2)
    (died,) = await launcher.check_health([running])
    assert died.ref == running and "no executor Job exists" in died.reason


async def test_a_job_deleted_after_launch_is_reported_at_once(
    launcher: KubernetesLauncher, kube: FakeKube
) -> None:
    launch = phase()
    await launcher.launch(launch)
    kube.delete_out_of_band(job_name(launch))
    (died,) = await launcher.check_health([ref(launch)])
    assert died.reason == "the executor Job was deleted before the phase finished"


async def test_running_and_pending_jobs_are_healthy(launcher: KubernetesLauncher, kube: FakeKube) -> None:
    running, pending = phase("run-1"), phase("run-2")
    await launcher.launch(running)
    await launcher.launch(pending)
    kube.run(job_name(running))
    assert await launcher.check_health([ref(running), ref(pending)]) == []


async def test_check_health_reports_the_failed_ones_with_their_reason(
    launcher: KubernetesLauncher, kube: FakeKube
) -> None:
    healthy, oom, evicted = phase("run-1"), phase("run-2"), phase("run-3", "apply", 2)
    for launch in (healthy, oom, evicted):
        await launcher.launch(launch)
    kube.oom_kill(job_name(oom))
    kube.evict(job_name(evicted), "The node had condition: [DiskPressure].")
    dead = await launcher.check_health([ref(healthy), ref(oom), ref(evicted)])
    assert {d.ref: d.reason.split(":")[0] for d in dead} == {
        ref(oom): "out of memory",
        ref(evicted): "evicted",
    }


async def test_a_job_that_succeeded_without_reporting_is_dead_after_the_grace(
    launcher: KubernetesLauncher, kube: FakeKube, clock: FakeClock
) -> None:
    launch = phase()
    await launcher.launch(launch)
    kube.exit(job_name(launch), 0)
    # The result report may still be landing; the database's list can be a moment old.
    assert await launcher.check_health([ref(launch)]) == []
    clock.advance(121)
    (died,) = await launcher.check_health([ref(launch)])
    assert died.reason == "the executor exited without reporting its result"


async def test_check_health_lists_at_most_once_per_interval(kube: FakeKube, clock: FakeClock) -> None:
    launcher = new_launcher(kube, clock, health_check_interval_seconds=15)
    running = PhaseRef("run-1", "plan", 1)
    await launcher.check_health([running])
    await launcher.check_health([running])
    assert len(kube.calls_to("list_jobs")) == 1
    clock.advance(15)
    await launcher.check_health([running])
    assert len(kube.calls_to("list_jobs")) == 2


# -- cancel, cleanup and orphans --------------------------------------------------------------


async def test_canceling_a_queued_run_that_never_launched_is_a_no_op(
    launcher: KubernetesLauncher, kube: FakeKube
) -> None:
    await launcher.cancel("run-queued")
    assert kube.jobs() == []


async def test_a_canceled_run_leaves_no_job_secret_or_pod_behind(
    launcher: KubernetesLauncher, kube: FakeKube
) -> None:
    # apply_queued: the plan's Job finished and may still be there; a racing launch made another.
    plan, other = phase("run-1"), phase("run-2")
    await launcher.launch(plan)
    await launcher.launch(other)
    kube.exit(job_name(plan), 0)
    await launcher.launch(phase("run-1", "apply", 1))
    await launcher.cancel("run-1")
    await launcher.cancel("run-1")  # idempotent
    assert [j.metadata.name for j in kube.jobs()] == [job_name(other)]
    assert [s.metadata.name for s in kube.secrets()] == [manifests.secret_name("run-2", "plan", 1)]
    assert {p.metadata.labels["job-name"] for p in kube.pods()} == {job_name(other)}
    assert {c["propagation_policy"] for c in kube.calls_to("delete_namespaced_job")} == {"Background"}


async def test_cleanup_removes_the_job_and_secret_and_is_idempotent(
    launcher: KubernetesLauncher, kube: FakeKube
) -> None:
    launch = phase()
    await launcher.launch(launch)
    kube.exit(job_name(launch), 0)
    await launcher.cleanup(ref(launch))
    await launcher.cleanup(ref(launch))
    assert kube.jobs() == [] and kube.secrets() == [] and kube.pods() == []


async def test_orphan_jobs_are_deleted_once_older_than_the_grace(
    launcher: KubernetesLauncher, kube: FakeKube, clock: FakeClock
) -> None:
    running, orphan = phase("run-1"), phase("run-2")
    await launcher.launch(running)
    await launcher.launch(orphan)
    # The orphan may belong to a phase another replica launched after `active` was read.
    assert await launcher.delete_orphans([ref(running)]) == []
    clock.advance(121)
    young = phase("run-3")
    await launcher.launch(young)
    assert await launcher.check_health([ref(running)]) == []
    assert [j.metadata.name for j in kube.jobs()] == sorted([job_name(running), job_name(young)])
    assert manifests.secret_name("run-2", "plan", 1) not in [s.metadata.name for s in kube.secrets()]


async def test_a_stale_attempt_is_an_orphan_of_its_own_run(
    launcher: KubernetesLauncher, kube: FakeKube, clock: FakeClock
) -> None:
    first, second = phase(attempt=1), phase(attempt=2)
    await launcher.launch(first)
    await launcher.launch(second)
    clock.advance(121)
    assert await launcher.delete_orphans([ref(second)]) == [
        job_name(first),
        manifests.secret_name("run-1", "plan", 1),
    ]


async def test_jobs_of_another_installation_are_left_alone(kube: FakeKube, clock: FakeClock) -> None:
    ours = new_launcher(kube, clock, instance="prod")
    theirs = new_launcher(kube, clock, instance="staging")
    await theirs.launch(phase("run-9"))
    clock.advance(300)
    assert await ours.delete_orphans([]) == []
    await ours.cancel("run-9")
    assert len(kube.jobs()) == 1


# -- classification, pure ----------------------------------------------------------------------


def failed_job_and_pods(kube: FakeKube, simulate: Callable[[FakeKube, str], None]) -> tuple[V1Job, list]:
    launch = phase()
    body = V1Job.from_dict(manifests.job(make_config(memory_limit="1Gi"), launch))
    kube.batch.create_namespaced_job(NAMESPACE, body)
    simulate(kube, job_name(launch))
    return kube.job(job_name(launch)), kube.pods_of(job_name(launch))


def test_each_failure_has_its_own_reason(kube: FakeKube) -> None:
    outcomes: dict[str, Callable[[FakeKube, str], None]] = {
        "out of memory": lambda k, n: k.oom_kill(n),
        "deadline exceeded": lambda k, n: k.exceed_deadline(n),
        "evicted": lambda k, n: k.evict(n),
        "image pull failure": lambda k, n: k.image_pull_backoff(n),
        "the executor exited with exit code 7": lambda k, n: k.exit(n, 7),
    }
    reasons = {}
    for expected, simulate in outcomes.items():
        job, pods = failed_job_and_pods(FakeKube(), simulate)
        reason = failure_reason(job, pods)
        assert reason is not None and reason.startswith(expected), (expected, reason)
        reasons[expected] = reason
    assert len(set(reasons.values())) == len(outcomes)


def test_a_pod_stuck_pulling_until_the_deadline_is_an_image_pull_failure(kube: FakeKube) -> None:
    def stuck_then_deadline(k: FakeKube, name: str) -> None:
        k.image_pull_backoff(name, "registry.example/missing:1")
        k.fail_job(name, "DeadlineExceeded", "Job was active longer than specified deadline")

    job, pods = failed_job_and_pods(kube, stuck_then_deadline)
    assert failure_reason(job, pods).startswith(
        "image pull failure: could not pull image registry.example/missing:1"
    )


def test_a_running_or_succeeded_job_has_no_failure_reason(kube: FakeKube) -> None:
    job, pods = failed_job_and_pods(kube, lambda k, n: k.run(n))
    assert failure_reason(job, pods) is None
    job, pods = failed_job_and_pods(FakeKube(), lambda k, n: k.exit(n, 0))
    assert failure_reason(job, pods) is None


def test_a_failed_job_whose_pods_are_gone_falls_back_to_its_condition(kube: FakeKube) -> None:
    def failed_and_collected(k: FakeKube, name: str) -> None:
        k.exit(name, 1)
        k.collect_pods(name)

    job, pods = failed_job_and_pods(kube, failed_and_collected)
    assert pods == []
    assert failure_reason(job, pods) == (
        "the executor Job failed: BackoffLimitExceeded: Job has reached the specified backoff limit"
    )
