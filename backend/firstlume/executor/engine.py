"""Runs the engine binary (terraform, tofu; terragrunt `run --all` as a best effort).

Every command runs non-interactively (TF_IN_AUTOMATION, TF_INPUT=0, -input=false), without
colour, with a CLI configuration file of the executor's own, and streams its output line by
line to `log` as it comes.
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
import io
import json
import os
import signal
import sys
import tarfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

LogWriter = Callable[[str], None]
MessageHandler = Callable[[dict[str, Any]], Awaitable[None]]

ENGINE_BINARIES = {"terraform": "terraform", "tofu": "tofu", "terragrunt": "terragrunt"}
LOCK_FILE_NAME = ".terraform.lock.hcl"

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the engine's process before exec. The engine has a session of its own (so it can
    be interrupted on its own), which also means it would outlive a killed executor and keep the
    state locked: ask the kernel to kill it when its parent dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_STREAM_LIMIT = 16 * 1024 * 1024  # apply -json lines carry whole diagnostics
_STOP_GRACE_SECONDS = 120.0  # the engine's own interrupt handling: let it save the state


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


def readable_message(message: dict[str, Any]) -> str:
    """One `-json` UI message as the text a person would have read without -json."""
    text = str(message.get("@message", ""))
    diagnostic = message.get("diagnostic")
    if message.get("type") == "diagnostic" and isinstance(diagnostic, dict):
        details = []
        if diagnostic.get("address"):
            details.append(f"  with {diagnostic['address']}")
        range_ = diagnostic.get("range")
        if isinstance(range_, dict) and range_.get("filename"):
            line = (range_.get("start") or {}).get("line")
            details.append(f"  on {range_['filename']}" + (f" line {line}" if line else ""))
        if diagnostic.get("detail"):
            details.append("")
            details.extend("  " + line for line in str(diagnostic["detail"]).splitlines())
        if details:
            text += "\n" + "\n".join(details)
    return text + "\n"


class Engine:
    def __init__(
        self,
        kind: str,
        *,
        code_dir: Path,
        work_dir: Path,
        env: Mapping[str, str],
        log: LogWriter,
        binary: str | None = None,
    ) -> None:
        if kind not in ENGINE_BINARIES:
            raise EngineError(f"unknown engine {kind!r}; expected one of {', '.join(ENGINE_BINARIES)}")
        self.kind = kind
        self.code_dir = code_dir
        self.work_dir = work_dir
        self.env = dict(env)
        self.log = log
        self.binary = binary or ENGINE_BINARIES[kind]
        self._errors: list[str] = []

    # -- commands ----------------------------------------------------------------------------

    async def init(self, *, lockfile_readonly: bool = False) -> None:
        args = ["init", "-input=false", "-no-color"]
        if lockfile_readonly:
            args.append("-lockfile=readonly")
        code, _ = await self._run(self._command(args))
        if code != 0:
            raise EngineError(self._failure("init", code))

    async def plan(self, plan_file: Path, *, var_file: Path | None, destroy: bool) -> bool:
        """Saves the plan to `plan_file`; returns whether it has changes."""
        args = ["plan", "-input=false", "-no-color", "-detailed-exitcode"]
        if destroy:
            args.append("-destroy")
        if var_file is not None:
            args.append(f"-var-file={var_file}")
        if self.kind == "terragrunt":
            return await self._terragrunt_plan(plan_file, args)
        code, _ = await self._run([self.binary, *args, f"-out={plan_file}"])
        if code not in (0, 2):
            raise EngineError(self._failure("plan", code))
        return code == 2

    async def show_json(self, plan_file: Path) -> dict[str, Any]:
        if self.kind == "terragrunt":
            return self._terragrunt_plan_json()
        code, out = await self._run([self.binary, "show", "-json", "-no-color", str(plan_file)], capture=True)
        if code != 0:
            raise EngineError(self._failure("show -json", code))
        try:
            return dict(json.loads(out))
        except ValueError as exc:
            raise EngineError(f"{self.binary} show -json printed no JSON: {exc}") from None

    async def apply(self, plan_file: Path, on_message: MessageHandler) -> int:
        """Applies the saved plan (no -auto-approve: a saved plan is the approval). Each -json
        message goes to `on_message`; other lines go to the log. Returns the exit code."""
        if self.kind == "terragrunt":
            self._terragrunt_restore(plan_file)
            command = self._terragrunt(["apply", "-json", "-input=false", "-no-color"], out_dirs=True)
        else:
            command = [self.binary, "apply", "-json", "-input=false", "-no-color", str(plan_file)]

        async def on_line(line: str) -> None:
            # Terragrunt may prefix a unit's lines; the JSON message starts at the first brace.
            start = line.find("{")
            try:
                message = json.loads(line[start:]) if start >= 0 else None
            except ValueError:
                message = None
            if isinstance(message, dict):
                await on_message(message)
            else:
                self._note(line)
                self.log(line)

        code, _ = await self._run(command, on_stdout=on_line)
        return code

    # -- files ---------------------------------------------------------------------------------

    def lock_file(self) -> str | None:
        path = self.code_dir / LOCK_FILE_NAME
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def restore_lock_file(self, text: str | None) -> None:
        if text is not None:
            (self.code_dir / LOCK_FILE_NAME).write_text(text, encoding="utf-8")

    def state_backends(self) -> list[dict[str, str]]:
        """The backend each unit uses, as init recorded it; "local" when it recorded none."""
        if self.kind != "terragrunt":
            return [{"unit": ".", "backend": _backend_type(self.code_dir / ".terraform")}]
        backends = []
        for unit in _terragrunt_units(self.code_dir):
            data_dirs = [unit / ".terraform", *sorted(unit.glob(".terragrunt-cache/*/*/.terraform"))]
            types = [_backend_type(d) for d in data_dirs if d.is_dir()] or ["local"]
            backends.append({"unit": _relative(unit, self.code_dir), "backend": types[-1]})
        return backends or [{"unit": ".", "backend": "local"}]

    # -- process ---------------------------------------------------------------------------------

    def _command(self, args: list[str]) -> list[str]:
        return self._terragrunt(args) if self.kind == "terragrunt" else [self.binary, *args]

    async def _run(
        self,
        command: list[str],
        *,
        on_stdout: Callable[[str], Awaitable[None]] | None = None,
        capture: bool = False,
    ) -> tuple[int, str]:
        """Runs `command` in the code dir; returns the exit code and, when `capture`, stdout.
        Stderr, and stdout unless captured or handled by `on_stdout`, go to the log line by line."""
        self._errors = []
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                cwd=self.code_dir,
                env=self.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=_STREAM_LIMIT,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        except FileNotFoundError:
            raise EngineError(f"{command[0]} is not installed (not found on PATH)") from None
        stdout, stderr = process.stdout, process.stderr
        assert stdout is not None and stderr is not None
        captured: list[bytes] = []

        async def pump_stdout() -> None:
            if capture:
                captured.append(await stdout.read())
                return
            async for line in _lines(stdout):
                if on_stdout is not None:
                    await on_stdout(line)
                else:
                    self._note(line)
                    self.log(line)

        async def pump_stderr() -> None:
            async for line in _lines(stderr):
                self._note(line)
                self.log(line)

        try:
            await asyncio.gather(pump_stdout(), pump_stderr())
            code = await process.wait()
        except BaseException:
            await _stop(process)
            raise
        return code, b"".join(captured).decode("utf-8", errors="replace")

    def _note(self, line: str) -> None:
        stripped = line.strip().lstrip("│").strip()
        if stripped.startswith("Error: "):
            self._errors.append(stripped)

    def _failure(self, what: str, code: int) -> str:
        summary = f"{self.binary} {what} failed (exit code {code})"
        if self._errors:
            summary += ": " + "; ".join(dict.fromkeys(self._errors))
        return summary

    # -- terragrunt run --all (best effort) -------------------------------------------------------
    #
    # `run --all` saves one plan per unit under --out-dir and its JSON under --json-out-dir. The
    # protocol has one plan file per run: here it is a tar.gz of both directories, and the plan
    # JSON is {"terragrunt_units": {"<unit path>": <show -json of that unit>}}.

    @property
    def _tg_plans(self) -> Path:
        return self.work_dir / "terragrunt" / "plans"

    @property
    def _tg_json(self) -> Path:
        return self.work_dir / "terragrunt" / "json"

    def _terragrunt(self, args: list[str], *, out_dirs: bool = False) -> list[str]:
        command = [self.binary, "run", "--all", "--non-interactive"]
        if out_dirs:
            command += ["--out-dir", str(self._tg_plans), "--json-out-dir", str(self._tg_json)]
        return [*command, "--", *args]

    async def _terragrunt_plan(self, plan_file: Path, args: list[str]) -> bool:
        code, _ = await self._run(self._terragrunt(args, out_dirs=True))
        if code not in (0, 2):
            raise EngineError(self._failure("run --all plan", code))
        self._terragrunt_archive(plan_file)
        units = self._terragrunt_plan_json()["terragrunt_units"]
        return any(
            (change.get("change") or {}).get("actions") not in (["no-op"], ["read"])
            for plan in units.values()
            for change in plan.get("resource_changes") or []
        ) or any(plan.get("output_changes") for plan in units.values())

    def _terragrunt_archive(self, plan_file: Path) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            for directory in (self._tg_plans, self._tg_json):
                if directory.is_dir():
                    archive.add(directory, arcname=directory.name)
        plan_file.write_bytes(buffer.getvalue())

    def _terragrunt_plan_json(self) -> dict[str, Any]:
        units = {}
        for path in sorted(self._tg_json.rglob("*.json")):
            units[_relative(path.parent, self._tg_json)] = json.loads(path.read_text(encoding="utf-8"))
        return {"terragrunt_units": units}

    def _terragrunt_restore(self, plan_file: Path) -> None:
        root = self._tg_plans.parent
        if root.is_dir():
            return
        root.mkdir(parents=True)
        with tarfile.open(plan_file, mode="r:gz") as archive:
            archive.extractall(root, filter="data")


async def _lines(stream: asyncio.StreamReader) -> Any:
    while True:
        try:
            raw = await stream.readline()
        except ValueError:  # a line longer than the limit: take what is there
            raw = await stream.read(_STREAM_LIMIT)
        if not raw:
            return
        line = raw.decode("utf-8", errors="replace")
        yield line if line.endswith("\n") else line + "\n"


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Interrupts the engine like Ctrl-C (it then finishes writing the state), kills it if it
    does not stop in time."""
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGINT)
        await asyncio.wait_for(asyncio.shield(process.wait()), timeout=_STOP_GRACE_SECONDS)
    except (TimeoutError, ProcessLookupError):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    except asyncio.CancelledError:
        os.killpg(process.pid, signal.SIGKILL)
        raise


def _backend_type(data_dir: Path) -> str:
    state = data_dir / "terraform.tfstate"
    try:
        backend = json.loads(state.read_text(encoding="utf-8")).get("backend") or {}
    except (OSError, ValueError):
        return "local"
    return str(backend.get("type") or "local")


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() or "."


def _terragrunt_units(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("terragrunt.hcl") if ".terragrunt-cache" not in p.parts)


def encode_plan_file(plan_file: Path) -> str:
    return base64.b64encode(plan_file.read_bytes()).decode("ascii")
