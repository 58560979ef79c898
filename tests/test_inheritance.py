"""Settings and variables resolve stack → nearest folder → organization → default, with origins."""

from __future__ import annotations

from firstlume.domain.inheritance import Level, levels_outermost_first, resolve_settings, resolve_variables


def test_defaults_when_nothing_is_set() -> None:
    resolved = resolve_settings(levels_outermost_first({}, [], {}))
    assert (resolved["require_approval"].value, resolved["require_approval"].origin) == (True, "default")
    assert (resolved["confirm_destructive"].value, resolved["confirm_destructive"].origin) == (
        False,
        "default",
    )


def test_nearest_level_wins_and_names_its_origin() -> None:
    levels = levels_outermost_first(
        {"require_approval": False, "confirm_destructive": False},
        [("prod", {"confirm_destructive": True}), ("prod/eu", {"require_approval": None})],
        {"require_approval": True},
    )
    resolved = resolve_settings(levels)
    assert (resolved["require_approval"].value, resolved["require_approval"].origin) == (True, "stack")
    assert (resolved["confirm_destructive"].value, resolved["confirm_destructive"].origin) == (
        True,
        "folder:prod",
    )


def test_inner_folder_beats_outer_folder_and_none_means_inherit() -> None:
    levels = levels_outermost_first(
        {"require_approval": True},
        [("prod", {"require_approval": True}), ("prod/eu", {"require_approval": False})],
        {"require_approval": None},
    )
    resolved = resolve_settings(levels)
    assert (resolved["require_approval"].value, resolved["require_approval"].origin) == (
        False,
        "folder:prod/eu",
    )


def test_false_is_a_value_not_an_absence() -> None:
    resolved = resolve_settings(levels_outermost_first({"require_approval": False}, [], {}))
    assert (resolved["require_approval"].value, resolved["require_approval"].origin) == (
        False,
        "organization",
    )


def test_variables_nearest_level_wins() -> None:
    levels = [
        Level("config.yaml", {"region": "a", "size": "s"}),
        Level("organization", {"region": "b"}),
        Level("folder:prod", {"size": "m"}),
        Level("stack", {"region": "c"}),
    ]
    resolved = resolve_variables(levels)
    assert (resolved["region"].value, resolved["region"].origin) == ("c", "stack")
    assert (resolved["size"].value, resolved["size"].origin) == ("m", "folder:prod")
