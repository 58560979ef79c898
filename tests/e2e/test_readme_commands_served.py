"""The README's command blocks, pasted into a shell as written, against `make run`: the bootstrap
without the demo (`.venv/bin/firstlume …` from the clone), the members block, and the managed
state example with the real `terraform` (the `http` backend block, the token in
TF_HTTP_PASSWORD, never in a file)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from support.make_run import make_run
from support.terraform import requires_terraform, terraform_env
from test_documented_commands import readme_block

ROOT = Path(__file__).resolve().parents[2]


def run_lines(
    lines: list[str], cwd: Path, env: dict[str, str], saved: Path, timeout: float = 240
) -> list[str]:
    """Each line in bash, in order, as in one shell (what a line exports, the next one has);
    returns what each printed. A line that fails fails the test, naming it."""
    outputs = []
    exports = ""
    for line in lines:
        result = subprocess.run(
            ["bash", "-c", f'set -e\n{exports}\n{line}\nexport -p > "$FL_EXPORTS"'],
            cwd=cwd,
            env={**env, "FL_EXPORTS": str(saved)},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"
        exports = saved.read_text()
        outputs.append(result.stdout)
    return outputs


@requires_terraform
def test_the_readme_commands_work_as_written(tmp_path: Path) -> None:
    if not (ROOT / ".venv" / "bin" / "firstlume").exists():
        pytest.fail("the README's commands run .venv/bin/firstlume: run `make install` (make test does)")
    data = tmp_path / "data"
    with make_run(data, scheduler=False) as (exports, _):
        base = exports["O"].rsplit("/orgs/", 1)[0]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FIRSTLUME_", "TF_"))}
        env["FIRSTLUME_DATA_DIR"] = str(data)  # the served database: make run's

        # Bootstrap without the demo: every line but `serve` (make run serves already).
        bootstrap = readme_block("bootstrap")
        assert bootstrap[-1].startswith(".venv/bin/firstlume serve ")
        printed = run_lines(bootstrap[:-1], ROOT, env, tmp_path / "exports")
        ada = printed[-1].strip()
        assert ada.startswith("fl_"), printed

        # Members, as ada (the organization's first member, so its admin).
        members = readme_block("members")
        placeholders = [line for line in members if "<" in line]
        assert len(placeholders) == 1 and "token revoke" in placeholders[0]
        acme = {
            **env,
            "FIRSTLUME_TOKEN": ada,
            "H": f"Authorization: Bearer {ada}",
            "O": f"{base}/orgs/acme",
        }
        printed = run_lines([line for line in members if "<" not in line], ROOT, acme, tmp_path / "exports")
        assert printed[0].strip().startswith("fl_")  # bob's token, only the token
        member = json.loads(printed[1])
        assert (member["role"], member["groups"]) == ("operator", ["sre"])

        # Managed state: the README's lines in a directory of Terraform code of one's own.
        code = tmp_path / "code"
        code.mkdir()
        (code / "main.tf").write_text(
            'resource "terraform_data" "a" {\n  input = "from the README"\n}\n'
            'output "greeting" {\n  value = terraform_data.a.output\n}\n'
        )
        token = exports["FIRSTLUME_TOKEN"]
        demo = {
            **terraform_env(tmp_path),
            "FIRSTLUME_TOKEN": token,
            "H": f"Authorization: Bearer {token}",
            "O": exports["O"],
            "ST": exports["ST"],
        }
        printed = run_lines(readme_block("managed state"), code, demo, tmp_path / "exports")
        version = json.loads(printed[-2])
        assert version["serial"] >= 1 and version["resources"] == 1, version
        outputs = json.loads(printed[-1])["outputs"]
        assert outputs == [
            {"name": "greeting", "type": "string", "value": "from the README", "sensitive": False}
        ]
        # The token is in no file Terraform wrote.
        written = [p for p in code.rglob("*") if p.is_file()]
        assert written and not [p for p in written if token.encode() in p.read_bytes()]
