"""FIRSTLUME_LAUNCHER=simulated (a load-testing tool) is a launcher like the others, built from its
settings; its plans are what `terraform show -json` prints, so the control plane works out their
changes as it does a real plan's. bench/fleet.py and tests/e2e/test_fleet_bench.py run it."""

from __future__ import annotations

from pathlib import Path

from conftest import settings_env
from firstlume.app import build_launcher
from firstlume.domain.changes import changes_from_plan
from firstlume.executor.simulated import address, line_text, plan_json
from firstlume.launchers.simulated import SimulatedLauncher
from firstlume.settings import Settings


def test_the_simulated_launcher_is_chosen_by_its_setting_with_its_workload(tmp_path: Path) -> None:
    settings = Settings.from_env(
        settings_env(
            f"sqlite+aiosqlite:///{tmp_path}/x.db", tmp_path / "data",
            FIRSTLUME_LAUNCHER="simulated", FIRSTLUME_SIMULATED_RESOURCES="7",
            FIRSTLUME_SIMULATED_LOG_LINES="300", FIRSTLUME_SIMULATED_LINES_PER_SECOND="12.5",
            FIRSTLUME_SIMULATED_RECORD_DIR=str(tmp_path / "records"),
        )
    )  # fmt: skip
    launcher = build_launcher(settings)
    assert isinstance(launcher, SimulatedLauncher)
    workload = launcher.workload
    assert (workload.resources, workload.log_lines, workload.lines_per_second) == (7, 300, 12.5)
    assert workload.record_dir == tmp_path / "records"


def test_a_simulated_plan_lists_one_create_per_resource() -> None:
    changes = changes_from_plan(plan_json(5))
    assert [(c.address, c.action) for c in changes] == [(address(i), "create") for i in range(5)]


def test_simulated_lines_are_numbered_and_stamped() -> None:
    run_id, phase, number, stamp = line_text("run1", "apply", 42).split(" ")[:4]
    assert (run_id, phase, number) == ("run1", "apply", "000042")
    assert float(stamp) > 0
