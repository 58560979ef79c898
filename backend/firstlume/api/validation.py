"""Input to typed commands: a pydantic refusal becomes the documented 422 `invalid_request`,
with `field` naming the failing field and one sentence a person understands. REST and GraphQL
both build their commands here, so a refusal reads the same through either."""

from __future__ import annotations

import types
import typing
from enum import Enum
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from firstlume.domain.errors import InvalidRequest
from firstlume.services.commands import Command, Expect, shown
from firstlume.services.validation import type_name

C = TypeVar("C", bound=Command)

# What a value of each pydantic type error should have been, in words.
EXPECTED = {
    "string_type": "a string",
    "bool_type": "true or false",
    "int_type": "a whole number",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
}


def command(model: type[C], data: Any, /, **identity: Any) -> C:
    """`data` (a request body, or GraphQL arguments) as a `model` command, or InvalidRequest.
    `identity` holds fields that come from elsewhere (the URL's path): the body may not set them."""
    if isinstance(data, dict):
        for name in identity:
            if name in data:
                raise InvalidRequest(_unknown(model, name, exclude=set(identity)), field=name)
        data = {**data, **identity}
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise invalid_request(model, error, exclude=set(identity)) from None


def invalid_request(model: type[Command], error: ValidationError, *, exclude: set[str]) -> InvalidRequest:
    errors = error.errors(include_url=False)
    # Unknown fields first: what was sent by mistake explains the rest.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    field = str(first["loc"][0]) if first["loc"] else None
    return InvalidRequest(_sentence(model, first, field, exclude), field=field)


def _sentence(model: type[Command], error: ErrorDetails, field: str | None, exclude: set[str]) -> str:
    kind = error["type"]
    if kind == "firstlume" or field is None:
        return _with_period(error["msg"])
    if kind == "extra_forbidden":
        return _unknown(model, field, exclude=exclude)
    info = model.model_fields.get(field)
    if kind == "missing" or _null_for_required(info, error):
        expected = _expectation(info, "missing", error)
        return f"'{field}' is required: {expected}." if expected else f"'{field}' is required."
    expected = _expectation(info, kind, error)
    if kind in ("string_too_long", "too_long"):
        return f"'{field}' must be at most {error['ctx']['max_length']} characters."
    if kind == "enum":
        expected = expected or f"one of {error.get('ctx', {}).get('expected', '')}"
        return f"'{field}' must be {expected}; got {shown(error['input'])}."
    if expected:
        where = f" at position {error['loc'][1]}" if len(error["loc"]) > 1 else ""
        return f"'{field}' must be {expected}; got {type_name(error['input'])}{where}."
    return f"'{field}' is not valid: {_with_period(error['msg'].lower())}"


def _null_for_required(info: FieldInfo | None, error: ErrorDetails) -> bool:
    """null sent for a field that must have a value says the same as leaving it out: the field
    is required (not "must be a string; got null")."""
    return (
        info is not None
        and info.is_required()
        and len(error["loc"]) == 1
        and error.get("input", ...) is None
        and not _nullable(info.annotation)
    )


def _expectation(info: FieldInfo | None, kind: str, error: ErrorDetails) -> str | None:
    if info is not None:
        for item in info.metadata:
            if isinstance(item, Expect):
                return item.what
        enum = _enum_of(info.annotation)
        if enum is not None:
            return "one of " + ", ".join(str(member.value) for member in enum)
    expected = EXPECTED.get(kind)
    if expected and kind == "bool_type" and info is not None and _nullable(info.annotation):
        return "true, false or null"
    return expected


def _enum_of(annotation: Any) -> type[Enum] | None:
    """The enum a field takes, also when it is optional (`Annotated[Kind, …] | None`: the union's
    member is the Annotated form, whose first argument is the enum)."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(candidate) is typing.Annotated:
            candidate = typing.get_args(candidate)[0]
        if isinstance(candidate, type) and issubclass(candidate, Enum):
            return candidate
    return None


def _nullable(annotation: Any) -> bool:
    return isinstance(annotation, types.UnionType) and type(None) in typing.get_args(annotation)


def _unknown(model: type[Command], field: str, *, exclude: set[str]) -> str:
    names = sorted(set(model.model_fields) - exclude)
    if not names:
        fields = "no fields"
    elif len(names) == 1:
        fields = f"only '{names[0]}'"
    else:
        fields = ", ".join(names)
    return model.unknown_field.format(field=field, noun=model.noun, fields=fields)


def _with_period(text: str) -> str:
    return text if text.endswith(".") else text + "."
