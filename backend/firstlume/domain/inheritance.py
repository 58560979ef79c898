"""Inherited settings and variables: stack, else the nearest folder, else the organization, else default.

Origins are the strings the API shows: "default", "organization", "folder:<path>", "stack",
and for variables also "config.yaml" (the outermost level, read from the commit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# Each inherited setting and its default. A level's value None means "inherit"; a default of
# None means "none" (no drift schedule; approvers None: any operator or admin may approve).
SETTING_DEFAULTS: dict[str, Any] = {
    "require_approval": True,
    "confirm_destructive": False,
    "drift_schedule": None,
    "approvers": None,
    "forbid_self_approval": False,
    # The names of the policies evaluated at the end of each plan (domain/policies.py).
    "policies": None,
    # Whether a pull request from a fork runs a proposed plan: "off", "plan_without_secrets"
    # (without the sensitive variables) or "plan". Its code is untrusted.
    "pull_requests_from_forks": "off",
}
SETTING_NAMES: tuple[str, ...] = tuple(SETTING_DEFAULTS)


class VariableKind(StrEnum):
    """How the executor hands a variable over: a Terraform input, or an environment variable."""

    TERRAFORM = "terraform"
    ENV = "env"


@dataclass(frozen=True)
class Level:
    """One level of the hierarchy with its explicit values (a missing key means "inherit")."""

    origin: str
    values: Mapping[str, Any]


@dataclass(frozen=True)
class Resolved:
    value: Any
    origin: str


def folder_origin(path: str) -> str:
    return f"folder:{path}"


def levels_outermost_first(
    organization: Mapping[str, Any],
    folders: Sequence[tuple[str, Mapping[str, Any]]],
    stack: Mapping[str, Any] | None,
) -> list[Level]:
    """`folders` are (path, values) from the outermost folder to the innermost."""
    levels = [Level("organization", organization)]
    levels += [Level(folder_origin(path), values) for path, values in folders]
    if stack is not None:
        levels.append(Level("stack", stack))
    return levels


def resolve_settings(levels: Sequence[Level]) -> dict[str, Resolved]:
    resolved: dict[str, Resolved] = {}
    for name, default in SETTING_DEFAULTS.items():
        resolved[name] = Resolved(default, "default")
        for level in reversed(levels):
            value = level.values.get(name)
            if value is not None:
                resolved[name] = Resolved(value, level.origin)
                break
    return resolved


def resolve_variables(levels: Sequence[Level]) -> dict[str, Resolved]:
    """Variables by name; each Level's values map a name to any payload. The nearest level wins."""
    resolved: dict[str, Resolved] = {}
    for level in levels:
        for name, payload in level.values.items():
            resolved[name] = Resolved(payload, level.origin)
    return resolved


def stacks_reached(
    level: str | None,
    stacks: Sequence[tuple[str | None, Any]],
    folders: Mapping[str, Any],
) -> int:
    """How many stacks take a setting from a level: the organization (`level` None) or the folder
    at path `level`. `stacks` are (folder path or None, the stack's explicit value), `folders`
    each folder's explicit value by path. A stack is reached when it is under the level and
    neither it nor a folder between it and the level sets the setting (what a confirmation of a
    change names: "applies to 14 stacks under prod/")."""
    reached = 0
    for folder, own in stacks:
        if own is not None:
            continue
        if level is not None and not (folder == level or (folder or "").startswith(level + "/")):
            continue
        # The folders between the stack and the level, innermost first.
        path, nearer_sets = folder, False
        while path and path != level:
            if folders.get(path) is not None:
                nearer_sets = True
                break
            path = path.rpartition("/")[0] or None
        reached += not nearer_sets
    return reached
