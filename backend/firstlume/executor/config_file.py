"""`config.yaml` at the stack's path: engine, Terraform variables, extra environment, and the
globs of other paths whose changes also start the stack's push runs (`watch:`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CONFIG_FILE_NAME = "config.yaml"
ENGINES = ("terraform", "tofu", "terragrunt")
DEFAULT_ENGINE = "terraform"
KEYS = ("engine", "variables", "environment", "watch")


class ConfigError(Exception):
    """config.yaml is invalid; the message names the key and what was expected."""


@dataclass(frozen=True)
class StackConfig:
    engine: str = DEFAULT_ENGINE
    variables: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    # Globs relative to the repository's root, e.g. "modules/**" (read by the control plane).
    watch: list[str] = field(default_factory=list)
    text: str | None = None  # the file as it is in the commit; None when there is none


def load_config(stack_dir: Path) -> StackConfig:
    path = stack_dir / CONFIG_FILE_NAME
    if not path.is_file():
        return StackConfig()
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{CONFIG_FILE_NAME} is not UTF-8 text: {exc}") from None
    return parse_config(text)


def parse_config(text: str) -> StackConfig:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_problem(exc)) from None
    if document is None:
        return StackConfig(text=text)
    if not isinstance(document, dict):
        raise ConfigError(
            f"{CONFIG_FILE_NAME} must be a mapping with the keys {', '.join(KEYS)}; got {_kind(document)}"
        )
    unknown = [str(key) for key in document if key not in KEYS]
    if unknown:
        raise ConfigError(
            f"{CONFIG_FILE_NAME}: unknown key {', '.join(repr(k) for k in unknown)}; "
            f"expected only {', '.join(KEYS)}"
        )
    return StackConfig(
        engine=_engine(document.get("engine")),
        variables=_variables(document.get("variables")),
        environment=_environment(document.get("environment")),
        watch=_watch(document.get("watch")),
        text=text,
    )


def _engine(value: Any) -> str:
    if value is None:
        return DEFAULT_ENGINE
    if value not in ENGINES:
        raise ConfigError(f"{CONFIG_FILE_NAME}: 'engine' must be one of {', '.join(ENGINES)}; got {value!r}")
    return str(value)


def _variables(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(
            f"{CONFIG_FILE_NAME}: 'variables' must be a mapping of variable names to values; "
            f"got {_kind(value)}"
        )
    variables: dict[str, Any] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"{CONFIG_FILE_NAME}: 'variables' names must be non-empty strings; got {name!r}"
            )
        try:
            # Round-trip through JSON: the values go to a .tfvars.json file, and YAML can
            # produce dates, sets or NaN, which JSON cannot carry.
            json.dumps(item, allow_nan=False)
            _reject_non_json(item)
        except (TypeError, ValueError):
            raise ConfigError(
                f"{CONFIG_FILE_NAME}: 'variables.{name}' must be a JSON value (string, number, "
                f"boolean, null, list or mapping); got {_kind(item)}"
            ) from None
        variables[name] = item
    return variables


def _reject_non_json(value: Any) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(key)
            _reject_non_json(item)
    elif isinstance(value, list):
        for item in value:
            _reject_non_json(item)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(value)
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise TypeError(value)


def _environment(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(
            f"{CONFIG_FILE_NAME}: 'environment' must be a mapping of variable names to strings; "
            f"got {_kind(value)}"
        )
    environment: dict[str, str] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise ConfigError(
                f"{CONFIG_FILE_NAME}: 'environment' names must be non-empty strings without '='; got {name!r}"
            )
        if not isinstance(item, str):
            raise ConfigError(
                f"{CONFIG_FILE_NAME}: 'environment.{name}' must be a string (quote it); got {_kind(item)}"
            )
        environment[name] = item
    return environment


def _watch(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise ConfigError(
            f"{CONFIG_FILE_NAME}: 'watch' must be a list of path globs such as [\"modules/**\"]; "
            f"got {_kind(value)}"
        )
    return list(value)


def _kind(value: Any) -> str:
    names = {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }
    name = names.get(type(value), type(value).__name__)
    return f"{name} ({value!r})" if isinstance(value, int | float | bool) else name


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        where = f"line {mark.line + 1}, column {mark.column + 1}"
        return f"{CONFIG_FILE_NAME} is not valid YAML: {where}: {problem}"
    return f"{CONFIG_FILE_NAME} is not valid YAML: {problem}"
