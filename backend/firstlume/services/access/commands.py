"""Typed commands of member and token management (parsed by the API layers, like
services/commands.py)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

from pydantic import AfterValidator, Field

from firstlume.services.access.roles import Role
from firstlume.services.commands import GROUP_NAME, LAX, Command, Expect, NonBlank, refuse

DURATION = re.compile(r"^(\d{1,6})([mhdw])$")
UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_LIFETIME = timedelta(days=3660)


def parse_duration(text: str) -> timedelta:
    """ "30d", "12h", "90m", "2w": how long a token lives."""
    match = DURATION.match(text.strip())
    if match is None:
        raise ValueError(f'A duration is a number and a unit (m, h, d or w), such as "30d"; got {text!r}.')
    lifetime = timedelta(seconds=int(match.group(1)) * UNIT_SECONDS[match.group(2)])
    if not timedelta(0) < lifetime <= MAX_LIFETIME:
        raise ValueError(f"A token lives more than 0 and at most {MAX_LIFETIME.days} days; got {text!r}.")
    return lifetime


def _groups(values: list[str]) -> list[str]:
    for value in values:
        if GROUP_NAME.match(value) is None:
            raise refuse(f"A group name is letters, digits, '.', '_' and '-' (at most 100); got {value!r}.")
    return sorted(set(values))


def _duration(value: str) -> str:
    try:
        parse_duration(value)
    except ValueError as error:
        raise refuse(str(error)) from None
    return value


class PutMember(Command):
    noun = "a member"
    role: Annotated[Role, LAX]
    groups: Annotated[
        list[Annotated[str, Field(max_length=100)]],
        Field(max_length=100),
        AfterValidator(_groups),
        Expect('a list of group names such as ["sre"]'),
    ] = []  # noqa: RUF012 (pydantic copies defaults)


class CreateToken(Command):
    noun = "a token"
    name: Annotated[NonBlank, Field(max_length=200)]
    # Absent or null: the token does not expire.
    expires_in: Annotated[str, AfterValidator(_duration), Expect('a duration such as "30d"')] | None = None

    def lifetime(self) -> timedelta | None:
        return parse_duration(self.expires_in) if self.expires_in else None


class SsoGroup(Command):
    """What one IdP group gives in an organization."""

    noun = "an IdP group's mapping"
    role: Annotated[Role, LAX]
    groups: Annotated[
        list[Annotated[str, Field(max_length=100)]],
        Field(max_length=100),
        AfterValidator(_groups),
        Expect('a list of group names such as ["sre"]'),
    ] = []  # noqa: RUF012 (pydantic copies defaults)


class PutSso(Command):
    """An organization's whole mapping of the identity provider's groups (it replaces the last)."""

    noun = "the single sign-on mapping"
    groups: Annotated[
        dict[Annotated[str, Field(min_length=1, max_length=200)], SsoGroup],
        Field(max_length=500),
        Expect('an object such as {"platform-sre": {"role": "operator", "groups": ["sre"]}}'),
    ]
    # Who signs in with groups that map to nothing: a member with this role, or (null) no member.
    default_role: Annotated[Role, LAX] | None = None
