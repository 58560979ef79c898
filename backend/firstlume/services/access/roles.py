"""Roles of members, from least to most: each one can do everything the one before it can."""

from __future__ import annotations

from enum import StrEnum

from firstlume.domain.errors import Forbidden, InvalidRequest


class Role(StrEnum):
    READER = "reader"
    OPERATOR = "operator"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return ORDER.index(self)

    def allows(self, needed: Role) -> bool:
        return self.rank >= needed.rank


ORDER = (Role.READER, Role.OPERATOR, Role.ADMIN)

WHAT_EACH_ROLE_DOES = {
    Role.READER: "sees stacks, runs, changes and logs",
    Role.OPERATOR: "also starts, approves, discards and cancels runs, and reads state",
    Role.ADMIN: "also changes settings, variables, stacks, folders and members, and force-unlocks state",
}


def parse_role(value: object, field: str = "role") -> Role:
    try:
        return Role(str(value))
    except ValueError:
        allowed = ", ".join(r.value for r in ORDER)
        raise InvalidRequest(f"'{field}' must be one of {allowed}; got {value!r}.", field=field) from None


class RoleRequired(Forbidden):
    """403 forbidden, naming the role needed (`needed`) and the caller's (`role`)."""

    @classmethod
    def of(cls, needed: Role, have: Role) -> RoleRequired:
        return cls(
            f"This needs the {needed.value} role; you are {_article(have.value)} {have.value} in this organization.",
            needed=needed.value,
            role=have.value,
        )


def check_role(have: str | None, needed: Role) -> Role:
    """The one check of a member's role against what a route or field needs."""
    role = Role(have) if have in {r.value for r in ORDER} else Role.READER
    if not role.allows(needed):
        raise RoleRequired.of(needed, role)
    return role


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"
