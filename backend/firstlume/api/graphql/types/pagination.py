"""Page sizes and page info shared by the paged lists (a stack's runs, a run's changes)."""

from __future__ import annotations

import strawberry

from firstlume.domain.errors import InvalidRequest


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None = strawberry.field(description="Pass as `after` for the next page.")


def check_first(first: int, maximum: int) -> int:
    if not 1 <= first <= maximum:
        raise InvalidRequest(f"'first' must be between 1 and {maximum}; got {first}.", field="first")
    return first
