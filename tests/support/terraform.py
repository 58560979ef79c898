"""Run the real `terraform` binary in tests, isolated from the machine's own configuration.

    env = terraform_env(tmp_path)                 # own CLI config file, TF_IN_AUTOMATION=1
    write_config(workdir, 'resource "terraform_data" "a" { input = "x" }')
    apply(workdir, env)                           # init + apply -auto-approve
    plan = plan_json(workdir, env)                # init + plan -out + show -json → dict
    result, messages = apply_json(workdir, env)   # apply -json of that plan file → parsed lines

Only the built-in `terraform` provider (`terraform_data`) needs no download.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

TERRAFORM = shutil.which("terraform")
# The suite needs the real binary: a missing terraform fails these tests loudly rather than
# skipping them, so a green run always means Terraform really ran.
requires_terraform = pytest.mark.usefixtures("terraform_binary")

PLAN_FILE = "plan.tfplan"
# Subcommands that take -input=false.
_INPUT_COMMANDS = frozenset({"init", "plan", "apply", "destroy", "refresh", "import"})


# One provider plugin cache for every terraform the tests run, across tests, xdist workers and
# sessions (Terraform's cache is meant for one user's sequential runs; the tests' stacks use only
# the built-in provider, so nothing is downloaded into it concurrently today).
PLUGIN_CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "firstlume-tests" / "terraform-plugins"
)
CLI_CONFIG = f'plugin_cache_dir = "{PLUGIN_CACHE}"\ndisable_checkpoint = true\n'


def install_cli_config() -> Path:
    """The CLI configuration the whole test session runs terraform with (conftest points
    TF_CLI_CONFIG_FILE at it: the machine's points at a missing file): the shared plugin cache,
    and no call to HashiCorp's checkpoint service."""
    PLUGIN_CACHE.mkdir(parents=True, exist_ok=True)
    config = PLUGIN_CACHE.parent / "terraform.rc"
    if not config.exists() or config.read_text() != CLI_CONFIG:
        written = config.with_suffix(f".{os.getpid()}")
        written.write_text(CLI_CONFIG)
        written.replace(config)  # atomic: the xdist workers start at once
    return config


def terraform_env(tmp_path: Path, cli_config: str = "", **extra: str) -> dict[str, str]:
    """The environment for terraform: the process's own, minus every TF_* variable, plus a CLI
    config file of the test's own (the session's, plus `cli_config`)."""
    config = Path(tmp_path) / "terraform.rc"
    PLUGIN_CACHE.mkdir(parents=True, exist_ok=True)
    config.write_text(CLI_CONFIG + cli_config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    env.update(
        TF_CLI_CONFIG_FILE=str(config),
        TF_IN_AUTOMATION="1",
        TF_INPUT="0",
        CHECKPOINT_DISABLE="1",
    )
    env.update(extra)
    return env


def run_terraform(
    args: Sequence[str], cwd: Path, env: dict[str, str], check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`terraform <args>` in cwd (with -input=false where the subcommand takes it)."""
    args = list(args)
    if args and args[0] in _INPUT_COMMANDS and "-input=false" not in args:
        args.insert(1, "-input=false")
    result = subprocess.run(
        [TERRAFORM or "terraform", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"terraform {' '.join(args)} exited {result.returncode}\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
    return result


def write_config(workdir: Path, text: str, name: str = "main.tf") -> Path:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / name).write_text(text)
    return workdir


def init(workdir: Path, env: dict[str, str]) -> None:
    run_terraform(["init", "-no-color"], workdir, env)


def apply(workdir: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """init, then `apply -auto-approve` of the configuration (not of a saved plan)."""
    init(workdir, env)
    return run_terraform(["apply", "-auto-approve", "-no-color", *args], workdir, env)


def plan_json(
    workdir: Path, env: dict[str, str], *plan_args: str, plan_file: str = PLAN_FILE
) -> dict[str, Any]:
    """init, `plan -out=<plan_file> <plan_args>`, and the `show -json` of that plan."""
    init(workdir, env)
    run_terraform(["plan", "-no-color", f"-out={plan_file}", *plan_args], workdir, env)
    return json.loads(run_terraform(["show", "-json", plan_file], workdir, env).stdout)


def apply_json(
    workdir: Path, env: dict[str, str], plan_file: str = PLAN_FILE
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """`apply -json <plan_file>`; a failed apply is not an error here. Returns the parsed lines."""
    result = run_terraform(["apply", "-json", plan_file], workdir, env, check=False)
    messages = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return result, messages
