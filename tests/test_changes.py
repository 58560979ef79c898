"""Changes from real `terraform show -json` plans, and edge cases on hand-written plans."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from firstlume.domain.changes import (
    GROUPS,
    SENSITIVE,
    SENSITIVE_CHANGED,
    UNKNOWN,
    AttributeChange,
    Change,
    Summary,
    _digest,
    _same_secret,
    changes_from_plan,
    classify,
    group_changes,
    summarize,
)
from support.examples import examples


def _by_address(changes: list[Change]) -> dict[str, Change]:
    return {c.address: c for c in changes}


def _attrs(change: Change) -> dict[str, AttributeChange]:
    return {a.name: a for a in change.attributes}


def _dump(changes: list[Change]) -> str:
    return json.dumps([dataclasses.asdict(c) for c in changes])


# --- hand-written plans -----------------------------------------------------------------------


def _rc(address: str, actions: list[str], **change: Any) -> dict[str, Any]:
    extra = {k: change.pop(k) for k in ("mode", "action_reason", "deposed") if k in change}
    return {
        "address": address,
        "mode": extra.get("mode", "managed"),
        "type": address.split(".")[-2],
        "change": {"actions": actions, **change},
        **{k: v for k, v in extra.items() if k != "mode"},
    }


def _one(rc: dict[str, Any], **plan: Any) -> Change:
    changes = changes_from_plan({"resource_changes": [rc], **plan})
    assert len(changes) == 1
    return changes[0]


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        (["delete"], ("delete", ())),
        (["create"], ("create", ())),
        (["update"], ("update", ())),
        (["delete", "create"], ("replace", ("delete", "create"))),
        (["create", "delete"], ("replace", ("create", "delete"))),
        (["create", "forget"], ("create", ())),
        (["forget"], None),
        (["no-op"], None),
        (["read"], None),
    ],
)
def test_classify_actions(actions: list[str], expected: Any) -> None:
    assert classify(actions) == expected


def test_data_sources_noops_and_forgets_are_skipped() -> None:
    plan = {
        "resource_changes": [
            _rc("data.x_y.d", ["read"], mode="data", before=None, after={"a": 1}),
            _rc("data.x_y.e", ["update"], mode="data", before={"a": 1}, after={"a": 2}),
            _rc("x_y.noop", ["no-op"], before={"a": 1}, after={"a": 1}),
            _rc("x_y.forgotten", ["forget"], before={"a": 1}, after=None),
        ]
    }
    assert changes_from_plan(plan) == []
    assert summarize([]).text == "no changes"
    assert not summarize([]).has_changes


def test_plan_without_resource_changes_gives_no_changes_and_four_empty_groups() -> None:
    assert changes_from_plan({"format_version": "1.2"}) == []
    assert [(a, t, items) for a, t, items in group_changes([])] == [(a, t, []) for a, t in GROUPS]


def test_summary_text_omits_zero_parts() -> None:
    assert Summary(delete=0, replace=2, update=0, create=1).text == "2 replace · 1 create"


def test_delete_lists_the_values_it_removes() -> None:
    change = _one(_rc("x_y.a", ["delete"], before={"id": "i-1", "name": "n", "empty": None}, after=None))
    assert change.action == "delete"
    assert change.attributes == (
        AttributeChange("id", "i-1", None, False),
        AttributeChange("name", "n", None, False),
    )


def test_replace_path_with_index_is_bracketed_and_forces_even_when_value_looks_unchanged() -> None:
    change = _one(
        _rc(
            "x_y.a",
            ["delete", "create"],
            before={"network": [{"name": "p1"}], "zone": "a"},
            after={"network": [{"name": "p2"}], "zone": "a"},
            before_sensitive={"network": [{"name": True}]},
            after_sensitive={"network": [{"name": True}]},
            replace_paths=[["network", 0, "name"], ["zone"]],
            action_reason="replace_because_cannot_update",
        )
    )
    assert change.replaced_because == ("network[0].name", "zone")
    assert change.attributes == (
        AttributeChange("network", [{"name": SENSITIVE}], [{"name": SENSITIVE_CHANGED}], True),
        AttributeChange("zone", "a", "a", True),
    )


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        ("replace_by_request", "replacement requested"),
        ("replace_because_tainted", "tainted"),
        ("replace_by_triggers", "replace_triggered_by"),
    ],
)
def test_replacement_without_paths_gives_its_reason(reason: str, text: str) -> None:
    change = _one(_rc("x_y.a", ["delete", "create"], before={"a": 1}, after={"a": 1}, action_reason=reason))
    assert change.replaced_because == (text,)
    assert change.attributes == ()


def test_reason_is_only_for_replacements() -> None:
    change = _one(
        _rc(
            "x_y.a",
            ["delete"],
            before={"a": 1},
            after=None,
            action_reason="delete_because_no_resource_config",
        )
    )
    assert change.replaced_because == () and change.stage_order == ()


def test_changed_secret_is_listed_without_exposing_either_side() -> None:
    change = _one(
        _rc(
            "x_y.a",
            ["update"],
            before={"password": "hunter2-old", "same": "hunter2-same"},
            after={"password": "hunter2-new", "same": "hunter2-same"},
            before_sensitive={"password": True, "same": True},
            after_sensitive={"password": True, "same": True},
        )
    )
    # The two values' digests differ: the after side says so; "same" (equal digests) is not listed.
    assert change.attributes == (AttributeChange("password", SENSITIVE, SENSITIVE_CHANGED, False),)
    assert "hunter2" not in _dump([change])


def test_becoming_sensitive_is_a_change() -> None:
    change = _one(
        _rc(
            "x_y.a",
            ["update"],
            before={"token": "tok-abc", "plain": "p"},
            after={"token": "tok-abc", "plain": "p"},
            before_sensitive={},
            after_sensitive={"token": True, "plain": [False]},
        )
    )
    assert change.attributes == (AttributeChange("token", SENSITIVE, SENSITIVE, False),)
    assert "tok-abc" not in _dump([change])


def test_whole_object_sensitive_masks_every_attribute() -> None:
    change = _one(
        _rc(
            "x_y.a",
            ["create"],
            before=None,
            after={"a": "alpha-secret", "b": {"c": "gamma-secret"}},
            before_sensitive=False,
            after_sensitive=True,
            after_unknown={"id": True},
        )
    )
    assert change.attributes == (
        AttributeChange("a", None, SENSITIVE, False),
        AttributeChange("b", None, SENSITIVE, False),
        AttributeChange("id", None, SENSITIVE, False),
    )
    assert "secret" not in _dump([change])


def test_sensitive_list_items_and_deep_values_are_masked() -> None:
    change = _one(
        _rc(
            "x_y.a",
            ["update"],
            before={"tags": ["pub", "priv-1"], "deep": {"l": [{"k": "deep-1", "v": "ok"}]}},
            after={"tags": ["pub", "priv-2"], "deep": {"l": [{"k": "deep-2", "v": "ok"}]}},
            before_sensitive={"tags": [False, True], "deep": {"l": [{"k": True}]}},
            after_sensitive={"tags": [False, True], "deep": {"l": [{"k": True}]}},
        )
    )
    attrs = _attrs(change)
    assert attrs["tags"].before == ["pub", SENSITIVE] and attrs["tags"].after == ["pub", SENSITIVE_CHANGED]
    assert attrs["deep"].before == {"l": [{"k": SENSITIVE, "v": "ok"}]}
    assert attrs["deep"].after == {"l": [{"k": SENSITIVE_CHANGED, "v": "ok"}]}
    dumped = _dump([change])
    assert "priv-" not in dumped and "deep-" not in dumped


def test_value_marked_sensitive_elsewhere_is_scrubbed_where_terraform_lost_the_mark() -> None:
    plan = {
        "resource_changes": [
            _rc(
                "x_y.a",
                ["update"],
                before={"in": "leaky-one", "out": "leaky-one"},
                after={"in": "leaky-two", "out": "leaky-two"},
                before_sensitive={"in": True},
                after_sensitive={"in": True},
            ),
            _rc(
                "x_y.b",
                ["create"],
                before=None,
                after={"copy": "leaky-two", "o": "out-secret", "seven": 7, "flag": True, "plain": "p"},
            ),
            _rc(
                "x_y.c",
                ["create"],
                before=None,
                after={"n": 7, "f": True},
                after_sensitive={"n": True, "f": True},
            ),
        ],
        "output_changes": {"o": {"before": None, "after": "out-secret", "after_sensitive": True}},
    }
    by = _by_address(changes_from_plan(plan))
    assert _attrs(by["x_y.a"])["out"] == AttributeChange("out", SENSITIVE, SENSITIVE_CHANGED, False)
    b = _attrs(by["x_y.b"])
    assert [b[n].after for n in ("copy", "o", "seven")] == [SENSITIVE] * 3
    assert b["flag"].after is True and b["plain"].after == "p"  # booleans are never scrubbed
    dumped = _dump(list(by.values()))
    assert "leaky" not in dumped and "out-secret" not in dumped


def test_sensitive_root_variable_is_scrubbed_even_inside_longer_strings() -> None:
    change = _one(
        _rc("x_y.a", ["create"], before=None, after={"url": "postgres://u:pa55word@db/eu", "region": "eu"}),
        variables={"db_password": {"value": "pa55word"}, "region": {"value": "eu"}},
        configuration={"root_module": {"variables": {"db_password": {"sensitive": True}, "region": {}}}},
    )
    assert _attrs(change)["url"].after == SENSITIVE
    assert _attrs(change)["region"].after == "eu"  # not sensitive


def test_nested_unknowns_are_known_after_apply() -> None:
    change = _one(
        _rc(
            "x_y.a",
            ["update"],
            before={"tags": {"a": "1"}, "list": ["x"]},
            after={"tags": {"a": "1"}, "list": ["x", None]},
            after_unknown={"tags": {"b": True}, "list": [False, True]},
        )
    )
    attrs = _attrs(change)
    assert attrs["tags"].after == {"a": "1", "b": UNKNOWN}
    assert attrs["list"].after == ["x", UNKNOWN]


def test_unknown_attribute_missing_from_after_is_listed() -> None:
    change = _one(
        _rc(
            "x_y.a",
            ["update"],
            before={"id": "1", "arn": "a1"},
            after={"id": "1"},
            after_unknown={"arn": True},
        )
    )
    assert change.attributes == (AttributeChange("arn", "a1", UNKNOWN, False),)


def test_deposed_object_gets_its_own_address() -> None:
    plan = {
        "resource_changes": [
            _rc("x_y.a", ["create", "delete"], before={"v": 1}, after={"v": 2}, replace_paths=[["v"]]),
            _rc("x_y.a", ["delete"], before={"v": 0}, after=None, deposed="0badf00d"),
        ]
    }
    changes = changes_from_plan(plan)
    assert [(c.address, c.action) for c in changes] == [
        ("x_y.a", "replace"),
        ("x_y.a (deposed object 0badf00d)", "delete"),
    ]


def test_an_unchanged_secret_reads_sensitive_on_both_sides_and_a_changed_one_says_so() -> None:
    change = _one(
        _rc(
            "x_y.a",
            ["update"],
            before={"cfg": {"size": 1, "kept": "kept-secret", "rotated": "old-secret"}},
            after={"cfg": {"size": 2, "kept": "kept-secret", "rotated": "new-secret"}},
            before_sensitive={"cfg": {"kept": True, "rotated": True}},
            after_sensitive={"cfg": {"kept": True, "rotated": True}},
        )
    )
    [cfg] = change.attributes
    assert cfg.before == {"size": 1, "kept": SENSITIVE, "rotated": SENSITIVE}
    assert cfg.after == {"size": 2, "kept": SENSITIVE, "rotated": SENSITIVE_CHANGED}
    assert "secret" not in _dump([change])


def test_firstlume_sensitive_values_are_masked_though_the_plan_marks_nothing() -> None:
    """A Terraform variable not declared sensitive, given a value Firstlume holds as sensitive
    (a string, and each leaf of an object): nothing in the plan marks it, it is masked anyway."""
    db = {"user": "dbadmin-leaf", "password": "pw-leaf-secret"}
    plan = {
        "format_version": "1.2",
        "resource_changes": [
            {
                "address": "terraform_data.x",
                "mode": "managed",
                "type": "terraform_data",
                "name": "x",
                "change": {
                    "actions": ["create"],
                    "before": None,
                    "after": {
                        "input": {"token": "tok-plain-secret", "url": "https://h/?t=tok-plain-secret", **db}
                    },
                    "after_unknown": {},
                    "before_sensitive": False,
                    "after_sensitive": {},
                },
            }
        ],
    }
    shown = json.dumps(
        [dataclasses.asdict(c) for c in changes_from_plan(plan, secrets=["tok-plain-secret", db])]
    )
    for secret in ("tok-plain-secret", "dbadmin-leaf", "pw-leaf-secret"):
        assert secret not in shown
    assert shown.count("(sensitive)") == 4
    # Without them, the same plan shows every value: the masking is theirs.
    assert "pw-leaf-secret" in json.dumps([dataclasses.asdict(c) for c in changes_from_plan(plan)])


def test_a_known_secret_deep_in_an_unmarked_map_is_masked_and_clean_maps_are_shown_whole() -> None:
    # Unmarked maps and lists are searched whole first: one holding a known secret (exactly, or
    # inside a longer string) is rebuilt with it masked; the others are shown as they are.
    change = _one(
        _rc(
            "x_y.a",
            ["update"],
            before={
                "nested": {"l": [{"k": "old", "n": 1}], "s": "x"},
                "clean": {"l": [1, 2.5, True, None, "a"]},
                "number": {"port": 5432, "flag": True},
            },
            after={
                "nested": {"l": [{"k": "in-the-mid-hunter2-dle", "n": 1}], "s": "x"},
                "clean": {"l": [1, 2.5, False, None, "b"]},
                "number": {"port": 6543, "flag": True},
            },
        ),
        variables={"pw": {"value": "hunter2"}, "port": {"value": 6543}},
        configuration={
            "root_module": {"variables": {"pw": {"sensitive": True}, "port": {"sensitive": True}}}
        },
    )
    attrs = _attrs(change)
    assert attrs["nested"].after == {"l": [{"k": SENSITIVE, "n": 1}], "s": "x"}
    assert attrs["nested"].before == {"l": [{"k": "old", "n": 1}], "s": "x"}
    assert attrs["clean"].after == {"l": [1, 2.5, False, None, "b"]}
    # A number marked sensitive elsewhere is masked; a boolean never is (True == 1 all the same).
    assert attrs["number"].after == {"port": SENSITIVE, "flag": True}
    assert "hunter2" not in _dump([change]) and "6543" not in _dump([change])


def test_marks_that_mark_nothing_show_the_value_and_unknowns_past_a_list_add_places() -> None:
    # Terraform writes `{}` and `[{}, {}]` marks for most values: they mask nothing. Unknowns
    # past the end of a list add their places, as known after apply.
    change = _one(
        _rc(
            "x_y.a",
            ["update"],
            before={"rules": [{"p": 1}, {"p": 2}], "tags": {"a": "1"}, "ids": ["i-1"], "more": ["x"]},
            after={"rules": [{"p": 1}, {"p": 3}], "tags": {"a": "2"}, "ids": ["i-1"], "more": ["m"]},
            before_sensitive={"rules": [{}, {"p": False}], "tags": {}, "ids": [False]},
            after_sensitive={"rules": [{}, {}], "tags": {}, "ids": [False]},
            after_unknown={"rules": [{}, {}], "tags": {}, "ids": [False, True], "more": [False, {}]},
        )
    )
    attrs = _attrs(change)
    assert attrs["rules"] == AttributeChange("rules", [{"p": 1}, {"p": 2}], [{"p": 1}, {"p": 3}], False)
    assert attrs["tags"] == AttributeChange("tags", {"a": "1"}, {"a": "2"}, False)
    assert attrs["ids"] == AttributeChange("ids", ["i-1"], ["i-1", UNKNOWN], False)
    # Places past the end that nothing marks unknown are still places: empty ones.
    assert attrs["more"] == AttributeChange("more", ["x"], ["m", None], False)


def test_a_value_that_reads_sensitive_as_text_is_compared_like_a_masked_one() -> None:
    # A literal "(sensitive)" on one side and a masked secret on the other: their values differ,
    # and the change says so, as when both were masked.
    change = _one(
        _rc(
            "x_y.a",
            ["update"],
            before={"v": "(sensitive)"},
            after={"v": "real-secret"},
            after_sensitive={"v": True},
        )
    )
    assert change.attributes == (AttributeChange("v", SENSITIVE, SENSITIVE_CHANGED, False),)


# A masked value's change is told without its digest where both sides are strings --------------

_SECRET_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
    max_leaves=6,
)


@hypothesis_settings(max_examples=examples(500), deadline=None)
@given(before=_SECRET_VALUES, after=_SECRET_VALUES)
def test_a_masked_value_is_told_changed_exactly_when_its_digest_changes(before: Any, after: Any) -> None:
    # The digest is the reference: 1 and 1.0, or true and 1, are different values to Terraform.
    assert _same_secret(before, after) == (_digest(before) == _digest(after))
    assert _same_secret(before, before)


def test_a_masked_value_of_another_json_type_is_changed_even_when_python_calls_it_equal() -> None:
    assert not _same_secret(1, 1.0) and not _same_secret(True, 1) and not _same_secret("1", 1)
    assert _same_secret("pw", "pw") and not _same_secret("pw", "pw2")


# Unmarked attributes are searched for secrets all at once: the same as one at a time -----------

_LEAVES = st.sampled_from(["s3cret", "a-hunter22-b", "(sensitive)", "plain", "", 4242, 4242.0, 7, True, None])
_ATTRIBUTE_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["k", "s3cret", "m"]), inner, max_size=2)
    ),
    max_leaves=5,
)
_MARKS = st.sampled_from([None, None, None, {}, [{}], False, True])
_UNKNOWN_MARKS = st.sampled_from([None, None, {}, [{}], False, True, [False, False, True]])
_ATTRIBUTES = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d", "e", "f"]),
    st.tuples(_ATTRIBUTE_VALUES, _ATTRIBUTE_VALUES, _MARKS, _MARKS, _UNKNOWN_MARKS),
    min_size=1,
)


def _resource(address: str, attributes: dict[str, tuple[Any, ...]]) -> dict[str, Any]:
    def marks(index: int) -> dict[str, Any]:
        return {name: parts[index] for name, parts in attributes.items() if parts[index] is not None}

    return _rc(
        address,
        ["update"],
        before={name: parts[0] for name, parts in attributes.items()},
        after={name: parts[1] for name, parts in attributes.items()},
        before_sensitive=marks(2),
        after_sensitive=marks(3),
        after_unknown=marks(4),
    )


@hypothesis_settings(max_examples=examples(300), deadline=None)
@given(attributes=_ATTRIBUTES)
def test_a_resources_attributes_show_as_each_would_alone(attributes: dict[str, tuple[Any, ...]]) -> None:
    # Known secrets (exact, numeric, inside a longer string) and "(sensitive)" text among clean
    # values: a resource with all the attributes shows each as a resource with only that one does.
    plan: dict[str, Any] = {
        "variables": {"pw": {"value": "hunter22"}},
        "configuration": {"root_module": {"variables": {"pw": {"sensitive": True}}}},
    }
    secrets = ["s3cret", 4242]
    together = changes_from_plan(
        {"resource_changes": [_resource("x_y.all", attributes)], **plan}, secrets=secrets
    )
    alone = changes_from_plan(
        {
            "resource_changes": [
                _resource("x_y.all", attributes),  # the same secrets are collected from the marks
                *(_resource(f"x_y.{name}", {name: parts}) for name, parts in sorted(attributes.items())),
            ],
            **plan,
        },
        secrets=secrets,
    )
    assert together[0].attributes == tuple(a for change in alone[1:] for a in change.attributes)
    shown = _dump(together)
    assert "s3cret" not in shown.replace('"s3cret":', "") and "hunter22" not in shown and "4242" not in shown
