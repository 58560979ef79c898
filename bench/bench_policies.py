"""How long 20 policies take on a 10,000-resource plan (issue 44: under 2 s in all).

    .venv/bin/python bench/bench_policies.py [RESOURCES] [POLICIES]

The plan is bench_changes.py's synthetic one (a dozen attributes per resource, sensitive nested
values, six kinds of action). The input is built as at the end of a plan (masked plan, run,
stack, grouped changes), then evaluated by the engine the control plane uses (regorus in its
worker process): 20 typical guardrails, each walking every resource change. Prints the time to
mask and serialize the input and the time of the evaluation (the worker's start included),
best of three, and each policy's own time.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from bench_changes import synthetic_plan

from firstlume.domain.changes import changes_from_plan, group_changes, scrubbed_plan
from firstlume.services.policies.engine import PolicySource, RegorusEngine

TEMPLATES = [
    # no deletion of protected things
    """deny contains msg if {{
  some rc in input.plan.resource_changes
  "delete" in rc.change.actions
  rc.change.before.tags.env == "prod{i}"
  msg := sprintf("%s may not be deleted", [rc.address])
}}""",
    # a region allow-list
    """deny contains msg if {{
  some rc in input.plan.resource_changes
  zone := object.get(rc.change, ["after", "zone"], "eu-west-1a")
  not startswith(zone, "eu-west-1")
  msg := sprintf("%s is outside eu-west-1 ({i})", [rc.address])
}}""",
    # no public ingress
    """deny contains msg if {{
  some rc in input.plan.resource_changes
  some rule in object.get(rc.change, ["after", "rules"], [])
  rule.cidr == "0.0.0.0/{i}"
  msg := sprintf("%s opens to the world", [rc.address])
}}""",
    # a warning counting replacements
    """warn contains msg if {{
  n := count([c | some g in input.changes.groups; g.action == "replace"; some c in g.changes])
  n > 100000 + {i}
  msg := sprintf("%d replacements", [n])
}}""",
]


def policies(count: int) -> list[PolicySource]:
    return [
        PolicySource(
            f"p{i}",
            f"package bench.p{i}\n\n" + TEMPLATES[i % len(TEMPLATES)].format(i=i) + "\n",
            ("deny", "warn"),
        )
        for i in range(count)
    ]


def policy_input(plan: dict[str, Any]) -> bytes:
    changes = changes_from_plan(plan)
    groups = [
        {
            "action": action,
            "title": title,
            "changes": [{"address": c.address, "type": c.type, "action": c.action} for c in items],
        }
        for action, title, items in group_changes(changes)
    ]
    document = {
        "plan": scrubbed_plan(plan),
        "run": {
            "id": "r",
            "type": "apply",
            "proposed": False,
            "trigger": "manual",
            "created_by": "a@b",
            "commit": None,
        },
        "stack": {"slug": "bench", "folder": None, "labels": []},
        "changes": {"groups": groups},
    }
    return json.dumps(document).encode()


async def main(resources: int, count: int) -> None:
    plan = synthetic_plan(resources)
    started = time.perf_counter()
    input_json = policy_input(plan)
    built = time.perf_counter() - started
    engine = RegorusEngine()
    sources = policies(count)
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        outcomes = await engine.evaluate(sources, input_json, time_limit_s=10)
        best = min(best, time.perf_counter() - started)
        errors = [o for o in outcomes if o.error]
        assert not errors, errors
    print(f"{resources} resources, {count} policies, input {len(input_json) / 1e6:.1f} MB")
    print(
        f"  input (changes, mask, serialize; the control plane reads changes stored): {built * 1000:.0f} ms"
    )
    print(f"  evaluation (worker start, input load, all policies): {best * 1000:.0f} ms (best of 3)")
    print("  per policy (ms): " + " ".join(str(o.took_ms) for o in outcomes))
    verdict = "under" if best < 2 else "OVER"
    print(f"  {verdict} the 2 s target")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    asyncio.run(main(args[0] if args else 10_000, args[1] if len(args) > 1 else 20))
