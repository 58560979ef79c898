"""The local launcher's spare executors are started while no executor runs: starting one costs a
phase that runs meanwhile as much CPU time again on a small machine. A launch that takes the last
spare while executors run still starts one, so the next launch finds one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from firstlume.launchers import local
from firstlume.launchers.base import ExecutorDied, PhaseLaunch
from firstlume.launchers.local import Isolation, LocalLauncher
from support.answering import refusing_control_plane
from support.waiting import until


class Refusing:
    """A control plane whose answers wait until `answer` is set: its executors run until then."""

    def __init__(self, url: str, answer: threading.Event) -> None:
        self.url = url
        self.answer = answer


@pytest.fixture
def refusing() -> Iterator[Refusing]:
    answer = threading.Event()
    with refusing_control_plane(hold=answer) as url:
        yield Refusing(url, answer)


def _phase(run_id: str, url: str) -> PhaseLaunch:
    return PhaseLaunch(
        run_id=run_id,
        phase="plan",
        attempt=1,
        token="refused",
        control_plane_url=url,
        org_slug="org",
        stack_slug="stack",
    )


async def test_spares_fill_up_only_while_no_executor_runs(tmp_path: Path, refusing: Refusing) -> None:
    deaths: list[ExecutorDied] = []

    async def died(death: ExecutorDied) -> None:
        deaths.append(death)

    launcher = LocalLauncher(
        tmp_path / "logs", isolation=Isolation(work_root=tmp_path / "work", sandbox="off")
    )
    await launcher.start(died)
    try:
        spares = lambda: len(launcher._spares)  # noqa: E731
        starting = lambda: launcher._spare_starting is not None and not launcher._spare_starting.done()  # noqa: E731
        await until(
            lambda: spares() == local.SPARES_IDLE and not starting(),
            60,
            "the spares to be started",
            interval=0.02,
        )

        # A run's two phases take a spare each, and no spare is started while they run.
        for run_id in ("plan", "apply"):
            await launcher.launch(_phase(run_id, refusing.url))
        assert spares() == local.SPARES_IDLE - 2 and not starting()

        # The launch that takes the last spare while executors run starts one.
        await launcher.launch(_phase("last", refusing.url))
        assert starting()

        # Once no executor runs, the spares fill up again.
        refusing.answer.set()
        await until(lambda: len(deaths) == 3, 60, "the three executors to end", interval=0.02)
        await until(
            lambda: spares() == local.SPARES_IDLE and not starting(),
            60,
            "the spares to fill up",
            interval=0.02,
        )
    finally:
        await launcher.close()


async def test_no_spares_when_the_setting_says_zero(tmp_path: Path, refusing: Refusing) -> None:
    """FIRSTLUME_EXECUTOR_SPARES=0: nothing waits ahead; each launch starts its executor."""
    deaths: list[ExecutorDied] = []

    async def died(death: ExecutorDied) -> None:
        deaths.append(death)

    launcher = LocalLauncher(
        tmp_path / "logs", isolation=Isolation(work_root=tmp_path / "work", sandbox="off"), spares=0
    )
    await launcher.start(died)
    try:
        await launcher.launch(_phase("plan", refusing.url))
        assert len(launcher._spares) == 0 and launcher._spare_starting is None
        refusing.answer.set()
        await until(lambda: len(deaths) == 1, 60, "the executor to end", interval=0.02)
        assert len(launcher._spares) == 0 and launcher._spare_starting is None
    finally:
        await launcher.close()


def test_the_setting_reaches_the_launcher(tmp_path: Path) -> None:
    from firstlume.app import build_launcher
    from firstlume.settings import Settings

    settings = Settings.from_env(
        {"FIRSTLUME_DATA_DIR": str(tmp_path / "data"), "FIRSTLUME_EXECUTOR_SPARES": "2"}
    )
    launcher = build_launcher(settings)
    assert isinstance(launcher, LocalLauncher) and launcher.spares_idle == 2
