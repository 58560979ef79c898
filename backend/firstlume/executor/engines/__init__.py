"""The engines a stack can choose in config.yaml, each one class behind `Engine`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from firstlume.executor.engines.base import Engine, EngineError, LogWriter
from firstlume.executor.engines.terraform import Terraform, Tofu
from firstlume.executor.engines.terragrunt import Terragrunt

__all__ = ["ENGINES", "Engine", "EngineError", "LogWriter", "Terraform", "Terragrunt", "Tofu", "make_engine"]

ENGINES: dict[str, type[Engine]] = {engine.kind: engine for engine in (Terraform, Tofu, Terragrunt)}


def make_engine(
    kind: str,
    *,
    code_dir: Path,
    work_dir: Path,
    env: Mapping[str, str],
    log: LogWriter,
    binary: str | None = None,
) -> Engine:
    engine = ENGINES.get(kind)
    if engine is None:
        raise EngineError(f"unknown engine {kind!r}; expected one of {', '.join(ENGINES)}")
    return engine(code_dir=code_dir, work_dir=work_dir, env=env, log=log, binary=binary)
