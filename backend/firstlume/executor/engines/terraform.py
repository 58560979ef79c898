"""Terraform, and OpenTofu, which takes the same commands: one root module per stack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from firstlume.executor.engines.base import Engine, EngineError, backend_type
from firstlume.executor.managed_state import ManagedUnit, declares_backend
from firstlume.protocol.executor import StateBackend


class Terraform(Engine):
    kind = "terraform"
    default_binary = "terraform"

    async def plan(self, plan_file: Path, *, var_file: Path | None, destroy: bool, lock: bool = True) -> bool:
        args = ["plan", "-input=false", "-no-color", "-detailed-exitcode"]
        if destroy:
            args.append("-destroy")
        if var_file is not None:
            args.append(f"-var-file={var_file}")
        if not lock:
            # A proposed run reads the state and never writes it: it takes no state lock.
            args.append("-lock=false")
        code, _ = await self._run([self.binary, *args, f"-out={plan_file}"])
        if code not in (0, 2):
            raise EngineError(self._failure("plan", code))
        return code == 2

    async def show_json(self, plan_file: Path) -> dict[str, Any]:
        code, out = await self._run([self.binary, "show", "-json", "-no-color", str(plan_file)], capture=True)
        if code != 0:
            raise EngineError(self._failure("show -json", code))
        try:
            return dict(json.loads(out))
        except ValueError as exc:
            raise EngineError(f"{self.binary} show -json printed no JSON: {exc}") from None

    def _apply_command(self, plan_file: Path) -> list[str]:
        return [self.binary, "apply", "-json", "-input=false", "-no-color", str(plan_file)]

    def managed_units(self) -> list[ManagedUnit]:
        return [] if declares_backend(self.code_dir) else [ManagedUnit(".", self.code_dir)]

    def state_backends(self) -> list[StateBackend]:
        return [StateBackend(unit=".", backend=backend_type(self.code_dir / ".terraform"))]


class Tofu(Terraform):
    kind = "tofu"
    default_binary = "tofu"
