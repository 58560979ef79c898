"""Terragrunt `run --all` (best effort): several units, each a root module of its own.

`run --all` saves one plan per unit under --out-dir and its JSON under --json-out-dir. The
protocol has one plan file per run: here it is a tar.gz of both directories, and the plan JSON
is {"terragrunt_units": {"<unit path>": <show -json of that unit>}}.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

from firstlume.executor.engines.base import Engine, EngineError, backend_type
from firstlume.executor.managed_state import ManagedUnit, terragrunt_declares_backend
from firstlume.protocol.executor import StateBackend

UNITS_KEY = "terragrunt_units"


class Terragrunt(Engine):
    kind = "terragrunt"
    default_binary = "terragrunt"

    @property
    def _plans_dir(self) -> Path:
        return self.work_dir / "terragrunt" / "plans"

    @property
    def _json_dir(self) -> Path:
        return self.work_dir / "terragrunt" / "json"

    def _command(self, args: list[str], *, out_dirs: bool = False) -> list[str]:
        command = [self.binary, "run", "--all", "--non-interactive"]
        if out_dirs:
            command += ["--out-dir", str(self._plans_dir), "--json-out-dir", str(self._json_dir)]
        return [*command, "--", *args]

    async def plan(self, plan_file: Path, *, var_file: Path | None, destroy: bool, lock: bool = True) -> bool:
        args = ["plan", "-input=false", "-no-color", "-detailed-exitcode"]
        if destroy:
            args.append("-destroy")
        if var_file is not None:
            args.append(f"-var-file={var_file}")
        if not lock:
            # A proposed run reads the state and never writes it: it takes no state lock.
            args.append("-lock=false")
        code, _ = await self._run(self._command(args, out_dirs=True))
        if code not in (0, 2):
            raise EngineError(self._failure("run --all plan", code))
        self._archive(plan_file)
        units = self._units_json()
        return any(
            (change.get("change") or {}).get("actions") not in (["no-op"], ["read"])
            for plan in units.values()
            for change in plan.get("resource_changes") or []
        ) or any(plan.get("output_changes") for plan in units.values())

    async def show_json(self, plan_file: Path) -> dict[str, Any]:
        self._restore(plan_file)
        return {UNITS_KEY: self._units_json()}

    def _apply_command(self, plan_file: Path) -> list[str]:
        self._restore(plan_file)
        return self._command(["apply", "-json", "-input=false", "-no-color"], out_dirs=True)

    def managed_units(self) -> list[ManagedUnit]:
        # Terragrunt copies a unit's files into its cache with the module: the override goes along.
        return [
            ManagedUnit(_relative(unit, self.code_dir), unit)
            for unit in _units(self.code_dir)
            if not terragrunt_declares_backend(unit)
        ]

    def state_backends(self) -> list[StateBackend]:
        backends = []
        for unit in _units(self.code_dir):
            data_dirs = [unit / ".terraform", *sorted(unit.glob(".terragrunt-cache/*/*/.terraform"))]
            types = [backend_type(d) for d in data_dirs if d.is_dir()] or ["local"]
            backends.append(StateBackend(unit=_relative(unit, self.code_dir), backend=types[-1]))
        return backends or [StateBackend(unit=".", backend="local")]

    def _archive(self, plan_file: Path) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            for directory in (self._plans_dir, self._json_dir):
                if directory.is_dir():
                    archive.add(directory, arcname=directory.name)
        plan_file.write_bytes(buffer.getvalue())

    def _units_json(self) -> dict[str, Any]:
        return {
            _relative(path.parent, self._json_dir): json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(self._json_dir.rglob("*.json"))
        }

    def _restore(self, plan_file: Path) -> None:
        """The apply phase gets the archive the plan phase made; unpack it once."""
        root = self._plans_dir.parent
        if root.is_dir():
            return
        root.mkdir(parents=True)
        with tarfile.open(plan_file, mode="r:gz") as archive:
            archive.extractall(root, filter="data")


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() or "."


def _units(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("terragrunt.hcl") if ".terragrunt-cache" not in p.parts)
