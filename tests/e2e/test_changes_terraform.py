"""Changes read from plans the real terraform made: groups, order, masking, replacements."""

from __future__ import annotations

import json
from typing import Any

import pytest

from firstlume.domain.changes import (
    GROUPS,
    SENSITIVE,
    SENSITIVE_CHANGED,
    UNKNOWN,
    AttributeChange,
    changes_from_plan,
    group_changes,
    summarize,
)
from support.scenarios import (
    MAIN_AFTER,
    MAIN_BEFORE,
    OTHER_AFTER,
    OTHER_BEFORE,
    SECRET_NEW,
    SECRET_OLD,
    two_step_plan,
)
from support.terraform import requires_terraform
from test_changes import _attrs, _by_address, _dump


@pytest.fixture(scope="module")
def main_plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("main")
    return two_step_plan(tmp / "stack", tmp, MAIN_BEFORE, MAIN_AFTER)


@pytest.fixture(scope="module")
def other_plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("other")
    return two_step_plan(tmp / "stack", tmp, OTHER_BEFORE, OTHER_AFTER, "-replace=terraform_data.asked")


@requires_terraform
def test_real_plan_groups_counts_order_and_summary_text(main_plan: dict[str, Any]) -> None:
    changes = changes_from_plan(main_plan)
    groups = group_changes(changes)
    assert [(action, title) for action, title, _ in groups] == list(GROUPS)
    assert [[c.address for c in items] for _, _, items in groups] == [
        ["terraform_data.gone"],
        ["terraform_data.repl"],
        ["terraform_data.upd1", "terraform_data.upd2"],
        ["terraform_data.new1", "terraform_data.new2"],
    ]
    summary = summarize(changes)
    assert summary.text == "1 delete · 1 replace · 2 update · 2 create"
    assert summary.as_dict() == {"delete": 1, "replace": 1, "update": 2, "create": 2}
    assert summary.has_changes
    assert all(c.unit == "." and c.type == "terraform_data" for c in changes)
    assert "terraform_data.same" not in _by_address(changes)  # no-op is not listed


@requires_terraform
def test_real_plan_unit_is_the_callers(main_plan: dict[str, Any]) -> None:
    assert {c.unit for c in changes_from_plan(main_plan, unit="live/eu/net")} == {"live/eu/net"}


@requires_terraform
def test_real_replacement_names_its_forcing_attribute_and_deletes_first(main_plan: dict[str, Any]) -> None:
    repl = _by_address(changes_from_plan(main_plan))["terraform_data.repl"]
    assert repl.action == "replace"
    assert repl.replaced_because == ("triggers_replace",)
    assert repl.stage_order == ("delete", "create")
    attrs = _attrs(repl)
    assert attrs["triggers_replace"] == AttributeChange("triggers_replace", ["v1"], ["v2"], True)
    assert attrs["id"].after == UNKNOWN and attrs["output"].after == UNKNOWN
    assert "input" not in attrs  # unchanged
    assert [a.name for a in repl.attributes if a.forces_replacement] == ["triggers_replace"]


@requires_terraform
def test_real_updates_list_only_changed_attributes_with_unknowns(main_plan: dict[str, Any]) -> None:
    upd1 = _by_address(changes_from_plan(main_plan))["terraform_data.upd1"]
    assert upd1.attributes == (
        AttributeChange("input", "a", "b", False),
        AttributeChange("output", "a", UNKNOWN, False),
    )
    assert upd1.replaced_because == () and upd1.stage_order == ()


@requires_terraform
def test_real_nested_sensitive_value_is_masked_and_its_siblings_shown(main_plan: dict[str, Any]) -> None:
    upd2 = _attrs(_by_address(changes_from_plan(main_plan))["terraform_data.upd2"])
    assert upd2["input"].before == {"name": "x", "secret": SENSITIVE}
    # The secret changed: said so (digests compared), without either value.
    assert upd2["input"].after == {"name": "y", "secret": SENSITIVE_CHANGED}
    # Terraform loses the mark on terraform_data.output: the secret is in the plan unmarked.
    assert SECRET_OLD in json.dumps(main_plan["resource_changes"])
    assert upd2["output"].before == {"name": "x", "secret": SENSITIVE}
    assert upd2["output"].after == UNKNOWN


@requires_terraform
def test_real_sensitive_variable_in_a_create_is_masked(main_plan: dict[str, Any]) -> None:
    new1 = _attrs(_by_address(changes_from_plan(main_plan))["terraform_data.new1"])
    assert new1["input"] == AttributeChange("input", None, SENSITIVE, False)
    assert new1["id"].after == UNKNOWN


@requires_terraform
def test_real_plans_never_leak_secret_strings(main_plan: dict[str, Any], other_plan: dict[str, Any]) -> None:
    for plan in (main_plan, other_plan):
        assert SECRET_NEW in json.dumps(plan)  # the raw plan has them
        dumped = _dump(changes_from_plan(plan))
        assert SECRET_OLD not in dumped and SECRET_NEW not in dumped
        assert "s3cr3t" not in dumped


@requires_terraform
def test_real_create_before_destroy_replacement_creates_first(other_plan: dict[str, Any]) -> None:
    cbd = _by_address(changes_from_plan(other_plan))["terraform_data.cbd"]
    assert cbd.action == "replace"
    assert cbd.stage_order == ("create", "delete")
    assert cbd.replaced_because == ("triggers_replace",)
    assert _attrs(cbd)["triggers_replace"] == AttributeChange("triggers_replace", "v1", "v2", True)


@requires_terraform
def test_real_requested_replacement_says_so(other_plan: dict[str, Any]) -> None:
    asked = _by_address(changes_from_plan(other_plan))["terraform_data.asked"]
    assert asked.action == "replace"
    assert asked.replaced_because == ("replacement requested",)
    assert not any(a.forces_replacement for a in asked.attributes)


@requires_terraform
def test_real_forget_and_data_reads_are_not_listed(other_plan: dict[str, Any]) -> None:
    actions = {rc["address"]: rc["change"]["actions"] for rc in other_plan["resource_changes"]}
    assert actions["terraform_data.kept"] == ["forget"]
    assert actions["data.terraform_remote_state.other"] == ["read"]
    changes = changes_from_plan(other_plan)
    assert [c.address for c in changes] == [
        "terraform_data.asked",
        "terraform_data.cbd",
        "terraform_data.path",
        "terraform_data.rotate",
    ]
    assert summarize(changes).text == "2 replace · 1 update · 1 create"


@requires_terraform
def test_real_rotated_secret_is_listed_though_both_sides_read_sensitive(other_plan: dict[str, Any]) -> None:
    rotate = _attrs(_by_address(changes_from_plan(other_plan))["terraform_data.rotate"])
    assert rotate["input"] == AttributeChange("input", SENSITIVE, SENSITIVE_CHANGED, False)
    assert rotate["output"].before == SENSITIVE  # unmarked by Terraform, scrubbed here
    assert rotate["output"].after == UNKNOWN
