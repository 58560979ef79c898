"""Checks of input that arrives outside the typed commands (services/commands.py): the CLI's
arguments and the executor's reports. Each failure names the field and what was expected."""

from __future__ import annotations

from typing import Any

from firstlume.domain.errors import InvalidRequest
from firstlume.services.commands import SLUG, shown


def require_slug(field: str, value: Any) -> str:
    if not isinstance(value, str) or not SLUG.match(value):
        raise InvalidRequest(
            f"'{field}' must be lowercase letters, digits and dashes (1 to 63 characters), "
            f"starting and ending with a letter or digit; got {shown(value)}.",
            field=field,
        )
    return value


def require_str(field: str, value: Any, *, max_length: int = 2000, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"'{field}' must be a string; got {type_name(value)}.", field=field)
    if not allow_empty and not value.strip():
        raise InvalidRequest(f"'{field}' must not be empty.", field=field)
    if len(value) > max_length:
        raise InvalidRequest(f"'{field}' must be at most {max_length} characters.", field=field)
    return value


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)
