"""The pure parts of stack dependencies: cycles among edges, and which read outputs an apply
changed (domain/dependencies.py)."""

from __future__ import annotations

from firstlume.domain.dependencies import changed_outputs, find_cycle, output_origin


def test_find_cycle_names_the_stacks_along_it_with_the_first_repeated() -> None:
    assert find_cycle({"app": ["cluster"], "cluster": ["network"], "network": ["app"]}) == [
        "app",
        "cluster",
        "network",
        "app",
    ]
    assert find_cycle({"a": ["a"]}) == ["a", "a"]


def test_find_cycle_accepts_a_diamond_and_long_chains() -> None:
    assert find_cycle({"app": ["cluster", "network"], "cluster": ["network"], "network": []}) is None
    chain = {f"s{i}": [f"s{i + 1}"] for i in range(5000)}  # deeper than Python's recursion limit
    assert find_cycle(chain) is None
    chain["s5000"] = ["s0"]
    cycle = find_cycle(chain)
    assert cycle is not None and len(cycle) == 5002 and cycle[0] == cycle[-1]


def test_changed_outputs_compares_values_and_presence_of_the_read_outputs_only() -> None:
    before = {"vpc_id": {"value": "vpc-1"}, "note": {"value": "a"}, "gone": {"value": 1}}
    after = {"vpc_id": {"value": "vpc-1"}, "note": {"value": "b"}, "new": {"value": [1]}}
    assert changed_outputs(before, after, ["vpc_id"]) == []
    assert changed_outputs(before, after, ["vpc_id", "note"]) == ["note"]
    assert changed_outputs(before, after, ["gone", "new", "absent"]) == ["gone", "new"]
    # A sensitive output is compared like any other (its value never leaves this function).
    secret = {"password": {"value": "s1", "sensitive": True}}
    assert changed_outputs(secret, {"password": {"value": "s2", "sensitive": True}}, ["password"]) == [
        "password"
    ]


def test_the_origin_names_output_stack_and_serial() -> None:
    assert output_origin("vpc_id", "network", 7) == "output vpc_id of stack network, state serial 7"
