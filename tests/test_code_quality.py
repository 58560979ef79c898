"""The type checking stays strict: `make check` runs ruff, mypy and the import contracts (each its own
step of `make test`); this holds the mypy configuration they run with to the house rules."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
