"""What every engine does, and the environment it runs in.

Every command runs non-interactively (TF_IN_AUTOMATION, TF_INPUT=0, -input=false), without
colour, with a CLI configuration file of the executor's own, and streams its output line by
line to `log` as it comes.
"""

from __future__ import annotations

import base64
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from firstlume.executor.engines.process import EngineNotFound, run_process
from firstlume.executor.managed_state import ManagedUnit
from firstlume.protocol.executor import StateBackend

LogWriter = Callable[[str], None]
MessageHandler = Callable[[dict[str, Any]], None]

LOCK_FILE_NAME = ".terraform.lock.hcl"


class EngineError(Exception):
    """The engine failed; the message is meant for the run's error."""


def write_cli_config(work_dir: Path) -> Path:
    """An empty CLI configuration, so no machine-level ~/.terraformrc leaks into the run."""
    path = work_dir / "firstlume.tfrc"
    path.write_text("# Firstlume executor: CLI configuration of this run only.\n", encoding="utf-8")
    return path


def write_var_file(work_dir: Path, variables: Mapping[str, Any]) -> Path:
    """Terraform input variables as a .tfvars.json file in the work dir, outside the checkout."""
    path = work_dir / "firstlume.auto.tfvars.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(dict(variables), handle)
    return path


def engine_environment(
    base: Mapping[str, str], work_dir: Path, extra: Mapping[str, str] = {}
) -> dict[str, str]:
    """The engine's environment: the executor's own minus FIRSTLUME_* (the phase token never
    reaches a provisioner), then `extra` (config.yaml `environment`, env-kind variables), then
    the settings that keep the engine non-interactive and on the executor's CLI config."""
    env = {k: v for k, v in base.items() if not k.startswith("FIRSTLUME_")}
    plugin_cache = work_dir / "plugin-cache"
    plugin_cache.mkdir(parents=True, exist_ok=True)
    env["TF_PLUGIN_CACHE_DIR"] = str(plugin_cache)
    env.update(extra)
    env["TF_IN_AUTOMATION"] = "1"
    env["TF_INPUT"] = "0"
    env["TF_CLI_CONFIG_FILE"] = str(write_cli_config(work_dir))
    return env


def encode_plan_file(plan_file: Path) -> str:
    return base64.b64encode(plan_file.read_bytes()).decode("ascii")


class Engine(ABC):
    """One engine binary behind the commands a phase needs, whatever the engine's own shape."""

    kind: ClassVar[str]
    default_binary: ClassVar[str]

    def __init__(
        self,
        *,
        code_dir: Path,
        work_dir: Path,
        env: Mapping[str, str],
        log: LogWriter,
        binary: str | None = None,
    ) -> None:
        self.code_dir = code_dir
        self.work_dir = work_dir
        self.env = dict(env)
        self.log = log
        self.binary = binary or self.default_binary
        self._errors: list[str] = []

    # -- commands ----------------------------------------------------------------------------------

    async def init(self, *, lockfile_readonly: bool = False) -> None:
        args = ["init", "-input=false", "-no-color"]
        if lockfile_readonly:
            args.append("-lockfile=readonly")
        code, _ = await self._run(self._command(args))
        if code != 0:
            raise EngineError(self._failure("init", code))

    @abstractmethod
    async def plan(self, plan_file: Path, *, var_file: Path | None, destroy: bool, lock: bool = True) -> bool:
        """Saves the plan to `plan_file`; returns whether it has changes. `lock` False plans
        without taking the state lock (a proposed run)."""

    @abstractmethod
    async def show_json(self, plan_file: Path) -> dict[str, Any]:
        """The saved plan as the JSON the protocol uploads."""

    @abstractmethod
    def _apply_command(self, plan_file: Path) -> list[str]:
        """The command that applies the saved plan with -json output."""

    async def apply(self, plan_file: Path, on_message: MessageHandler) -> int:
        """Applies the saved plan (no -auto-approve: a saved plan is the approval). Each -json
        message goes to `on_message`; other lines go to the log. Returns the exit code."""
        command = self._apply_command(plan_file)

        def on_line(line: str) -> None:
            # Terragrunt may prefix a unit's lines; the JSON message starts at the first brace.
            start = line.find("{")
            try:
                message = json.loads(line[start:]) if start >= 0 else None
            except ValueError:
                message = None
            if isinstance(message, dict):
                on_message(message)
            else:
                self._log_line(line)

        code, _ = await self._run(command, on_stdout=on_line)
        return code

    # -- files ---------------------------------------------------------------------------------------

    def lock_file(self) -> str | None:
        path = self.code_dir / LOCK_FILE_NAME
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def restore_lock_file(self, text: str | None) -> None:
        if text is not None:
            (self.code_dir / LOCK_FILE_NAME).write_text(text, encoding="utf-8")

    @abstractmethod
    def managed_units(self) -> list[ManagedUnit]:
        """The units whose code declares no backend: their state is kept in Firstlume."""

    @abstractmethod
    def state_backends(self) -> list[StateBackend]:
        """The backend each unit uses, as init recorded it; "local" when it recorded none."""

    # -- process -------------------------------------------------------------------------------------

    def _command(self, args: list[str]) -> list[str]:
        return [self.binary, *args]

    async def _run(
        self,
        command: list[str],
        *,
        on_stdout: Callable[[str], None] | None = None,
        capture: bool = False,
    ) -> tuple[int, str]:
        """Runs `command` in the code dir; returns the exit code and, when `capture`, stdout.
        Stderr, and stdout unless captured or handled by `on_stdout`, go to the log line by line."""
        self._errors = []
        try:
            return await run_process(
                command,
                cwd=self.code_dir,
                env=self.env,
                on_stdout=None if capture else (on_stdout or self._log_line),
                on_stderr=self._log_line,
            )
        except EngineNotFound:
            raise EngineError(f"{command[0]} is not installed (not found on PATH)") from None

    def _log_line(self, line: str) -> None:
        stripped = line.strip().lstrip("│").strip()
        if stripped.startswith("Error: "):
            self._errors.append(stripped)
        self.log(line)

    def _failure(self, what: str, code: int) -> str:
        summary = f"{self.binary} {what} failed (exit code {code})"
        if self._errors:
            summary += ": " + "; ".join(dict.fromkeys(self._errors))
        return summary


def backend_type(data_dir: Path) -> str:
    state = data_dir / "terraform.tfstate"
    try:
        backend = json.loads(state.read_text(encoding="utf-8")).get("backend") or {}
    except (OSError, ValueError):
        return "local"
    return str(backend.get("type") or "local")
