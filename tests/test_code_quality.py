"""The house checks: ruff (lint and format) and mypy, run as part of the suite so CI enforces them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_lint_is_clean() -> None:
    result = _run(str(BIN / "ruff"), "check", "backend", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = _run(str(BIN / "ruff"), "format", "--check", "backend", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    result = _run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_runs_strict_with_the_strawberry_plugin_and_no_blanket_ignores() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    assert "strawberry.ext.mypy_plugin" in config["plugins"]
    # The only relaxation allowed is the one for Strawberry's decorators, and nothing ignores errors.
    for override in config.get("overrides", []):
        assert set(override) <= {"module", "disallow_untyped_decorators"}, override
    sources = [path.read_text() for path in (ROOT / "backend").rglob("*.py")]
    assert not any("# type: ignore\n" in text or "# mypy: ignore-errors" in text for text in sources)
