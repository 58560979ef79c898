"""Fields filled when an object is built, not resolved one by one: graphql-core reads them as
attributes, where a resolver per field would cost a call with its arguments and info each."""

from __future__ import annotations

from typing import Any

import strawberry


def filled(description: str | None = None) -> Any:
    """A field that the type's __post_init__ sets from its record, so it is not an argument of
    the constructor: `Run(row=..., loaders=...)` stays the way to build one."""
    field = strawberry.field(description=description)
    field.init = False
    return field
