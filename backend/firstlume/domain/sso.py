"""What single sign-on decides without I/O: the membership an organization's mapping gives a
person from the groups their identity provider lists (adoption-api.md section 10)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

ROLE_ORDER = ("reader", "operator", "admin")


@dataclass(frozen=True)
class GroupMapping:
    """What one IdP group gives: a role, and Firstlume groups (named in approvers)."""

    role: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class MappedMembership:
    role: str
    groups: tuple[str, ...]


def mapped_membership(
    mapping: Mapping[str, GroupMapping], default_role: str | None, idp_groups: Iterable[str]
) -> MappedMembership | None:
    """The highest role and every group the person's IdP groups map to; `default_role` (no
    groups) when none of them is mapped; None (not a member) when there is no default either."""
    matched = [mapping[name] for name in set(idp_groups) if name in mapping]
    if not matched:
        return MappedMembership(default_role, ()) if default_role is not None else None
    role = max((m.role for m in matched), key=ROLE_ORDER.index)
    groups = sorted({group for m in matched for group in m.groups})
    return MappedMembership(role, tuple(groups))


def groups_of_claim(value: object) -> list[str]:
    """The groups claim as a list of names: providers send a list, some a single string, and
    some nothing at all for a person in no group."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [item for item in value if isinstance(item, str)]
    return []


def covers(folder_path: str, stack_folder: str | None) -> bool:
    """Whether a grant on `folder_path` reaches a stack in `stack_folder` (None: top level): the
    folder itself and everything under it."""
    if stack_folder is None:
        return False
    return stack_folder == folder_path or stack_folder.startswith(folder_path + "/")


def effective_role(org_role: str, grants: Iterable[tuple[str, str]], stack_folder: str | None) -> str:
    """The member's role on a stack in `stack_folder`: the organization role, raised (never
    lowered) by the grants (folder path, role) on that folder or one above it."""
    roles = [org_role, *(role for path, role in grants if covers(path, stack_folder))]
    return max(roles, key=ROLE_ORDER.index)
