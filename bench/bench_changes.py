"""How long computing changes takes for a synthetic `show -json` plan of 5,000 and 20,000 resources.

    .venv/bin/python bench/bench_changes.py [N ...]

Each resource has a dozen attributes (nested maps and lists, a sensitive nested value, unknowns);
actions cycle through update, create, replace, create-before-destroy, delete and no-op. Three
sensitive root variables turn on the substring scrubbing. Prints the best of a few runs.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from firstlume.domain.changes import changes_from_plan, group_changes, summarize

ACTIONS = (["update"], ["create"], ["delete", "create"], ["create", "delete"], ["delete"], ["no-op"])


def _values(i: int, version: int) -> dict[str, Any]:
    return {
        "id": f"id-{i}",
        "name": f"resource-{i}",
        "size": 10 + version,
        "enabled": True,
        "tags": {"team": "platform", "env": "prod", "index": str(i), "version": str(version)},
        "rules": [{"port": 443 + k, "cidr": f"10.{k}.0.0/16", "note": "x" * 40} for k in range(4)],
        "credentials": {"user": f"user-{i}", "password": f"pw-{i}-{version}"},
        "description": "a fairly long description string " * 3,
        "labels": ["a", "b", "c"],
        "endpoint": None,
        "zone": "eu-west-1a",
        "arn": f"arn:aws:svc:eu:123:res/{i}",
    }


def synthetic_plan(n: int) -> dict[str, Any]:
    changes = []
    for i in range(n):
        actions = ACTIONS[i % len(ACTIONS)]
        before = None if actions == ["create"] else _values(i, 1)
        after = None if actions == ["delete"] else _values(i, 1 if actions == ["no-op"] else 2)
        sens = {"credentials": {"password": True}}
        change: dict[str, Any] = {
            "actions": actions,
            "before": before,
            "after": after,
            "before_sensitive": sens if before else False,
            "after_sensitive": sens if after else False,
            "after_unknown": {"arn": True, "rules": [{}, {}, {}, {}]} if after else {},
        }
        if after is not None:
            after.pop("arn")
        if len(actions) == 2:
            change["replace_paths"] = [["zone"], ["rules", 0, "cidr"]]
        changes.append(
            {
                "address": f"module.m{i % 50}.x_thing.r[{i}]",
                "mode": "managed",
                "type": "x_thing",
                "change": change,
                **({"action_reason": "replace_because_cannot_update"} if len(actions) == 2 else {}),
            }
        )
    return {
        "resource_changes": changes,
        "variables": {f"v{k}": {"value": f"variable-secret-{k}"} for k in range(3)},
        "configuration": {"root_module": {"variables": {f"v{k}": {"sensitive": True} for k in range(3)}}},
    }


def bench(n: int, repeat: int = 3) -> None:
    plan = synthetic_plan(n)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        changes = changes_from_plan(plan)
        summary = summarize(changes)
        group_changes(changes)
        best = min(best, time.perf_counter() - t0)
    attrs = sum(len(c.attributes) for c in changes)
    print(
        f"{n:>7} resources: {best * 1000:8.1f} ms  ({best / n * 1e6:6.1f} µs/resource)  "
        f"{len(changes)} changes, {attrs} attributes, {summary.text}"
    )


if __name__ == "__main__":
    for n in [int(a) for a in sys.argv[1:]] or [5_000, 20_000]:
        bench(n)
