"""The web UI's build: `make run` rebuilds it only when its sources, the schema or the lock file
changed (the files graphql-codegen writes are not inputs), and Vite's bundle is split by route so
that no chunk is over its 500 kB warning."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "backend" / "firstlume" / "static"
VITE_WARNING_BYTES = 500 * 1000  # vite's chunkSizeWarningLimit: 500 kB


def make_dry_run(*args: str) -> subprocess.CompletedProcess[str]:
    """`make -n` (print, run nothing) in the repository; `-W file` pretends that file changed."""
    return subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(ROOT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def built() -> None:
    if "npm" in make_dry_run("frontend").stdout:
        pytest.fail(
            "the web UI is not built, or older than its sources: run `make frontend` (make test does)"
        )


def test_make_run_builds_the_ui_only_when_an_input_changed(built: None) -> None:
    assert "npm" not in make_dry_run("run").stdout
    for generated in ("frontend/src/graphql/generated.ts", "frontend/src/graphql/schema.ts"):
        assert "npm" not in make_dry_run("-W", generated, "frontend").stdout, generated
    for source in ("frontend/src/App.tsx", "schema.graphql", "frontend/vite.config.ts"):
        assert "npm run build" in make_dry_run("-W", source, "frontend").stdout, source
    for lock in ("frontend/package-lock.json", "frontend/package.json"):
        planned = make_dry_run("-W", lock, "frontend").stdout
        assert "npm ci" in planned and "npm run build" in planned, lock


def test_no_chunk_of_the_ui_is_over_vites_warning(built: None) -> None:
    chunks = {path.name: path.stat().st_size for path in (STATIC / "assets").glob("*.js")}
    assert len(chunks) > 5, f"the UI is not split by route: {sorted(chunks)}"
    large = {name: size for name, size in chunks.items() if size > VITE_WARNING_BYTES}
    assert not large, f"over Vite's 500 kB warning: {large}"
