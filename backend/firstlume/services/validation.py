"""Checks of user input shared by the use cases; each failure names the field and what was expected."""

from __future__ import annotations

import re
from typing import Any

from firstlume.domain.errors import InvalidRequest

SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
PATH_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")


def require_slug(field: str, value: Any) -> str:
    if not isinstance(value, str) or not SLUG.match(value):
        raise InvalidRequest(
            f"'{field}' must be lowercase letters, digits and dashes (1 to 63 characters), "
            f"starting and ending with a letter or digit; got {value!r}.",
            field=field,
        )
    return value


def require_folder_path(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"'{field}' must be a folder path such as \"prod/eu\".", field=field)
    segments = value.strip("/").split("/")
    if not value.strip("/") or not all(PATH_SEGMENT.match(s) and s not in (".", "..") for s in segments):
        raise InvalidRequest(
            f"'{field}' must be a folder path such as \"prod/eu\" (letters, digits, '-', '_', '.'); got {value!r}.",
            field=field,
        )
    return "/".join(segments)


def require_str(field: str, value: Any, *, max_length: int = 2000, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"'{field}' must be a string; got {_type_name(value)}.", field=field)
    if not allow_empty and not value.strip():
        raise InvalidRequest(f"'{field}' must not be empty.", field=field)
    if len(value) > max_length:
        raise InvalidRequest(f"'{field}' must be at most {max_length} characters.", field=field)
    return value


def optional_bool(field: str, value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise InvalidRequest(f"'{field}' must be true, false or null; got {_type_name(value)}.", field=field)
    return value


def require_bool(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest(f"'{field}' must be true or false; got {_type_name(value)}.", field=field)
    return value


def require_relative_path(field: str, value: Any) -> str:
    text = require_str(field, value, max_length=1000)
    parts = [p for p in text.strip().split("/") if p not in ("", ".")]
    if text.startswith("/") or any(p == ".." for p in parts):
        raise InvalidRequest(
            f"'{field}' must be a path inside the repository, such as \"infra/net\"; got {value!r}.",
            field=field,
        )
    return "/".join(parts) or "."


def _type_name(value: Any) -> str:
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


def type_name(value: Any) -> str:
    return _type_name(value)
