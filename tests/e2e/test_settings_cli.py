"""The CLI explains a bad setting and rewrites the README's settings tables."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from firstlume import settings_docs


def test_serve_explains_a_bad_variable_and_exits_2_without_a_traceback(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "FIRSTLUME_DATA_DIR": str(tmp_path),
        "FIRSTLUME_LAUNCHER": "kubernetes",
        "FIRSTLUME_K8S_IMAGE": "firstlume:1",
        "FIRSTLUME_K8S_MEMORY_LIMIT": "two gigabytes",
    }
    result = subprocess.run(
        [sys.executable, "-m", "firstlume", "serve", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("firstlume: FIRSTLUME_K8S_MEMORY_LIMIT must be a Kubernetes quantity")
    assert "'two gigabytes'" in result.stderr and "Traceback" not in result.stderr


def test_settings_docs_rewrites_only_the_generated_part(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "intro\n<!-- generated: settings (firstlume settings-docs) -->\nold\n<!-- end: settings -->\n"
        "middle\n<!-- generated: k8s-settings (firstlume settings-docs) -->\n<!-- end: k8s-settings -->\nend\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "firstlume", "settings-docs", "--write", str(readme)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FIRSTLUME_DATA_DIR": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    text = readme.read_text()
    assert text.startswith("intro\n") and "\nmiddle\n" in text and text.endswith("end\n")
    assert "old" not in text
    assert settings_docs.generated_parts(text) == {t: settings_docs.render(t) for t in settings_docs.TABLES}
    assert re.search(r"\| `FIRSTLUME_K8S_IMAGE` \|", text)
