"""Stack dependencies (adoption-api.md, section 9), without I/O: a cycle among the stacks'
edges, which outputs an apply changed, and the words that name an output's origin."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from firstlume.domain.errors import Conflict


class DependencyCycle(Conflict):
    code = "dependency_cycle"


class MissingUpstreamOutput(Conflict):
    """A dependency maps an output its upstream's current state does not have: the dependent's
    plan fails with this reason before Terraform starts."""

    code = "missing_upstream_output"


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle of `edges` (stack → the stacks it depends on) as the stacks along it, the first
    repeated at the end ("a", "b", "a"), or None. Depth first, iterative: no recursion limit."""
    done: set[str] = set()
    for start in sorted(edges):
        if start in done:
            continue
        path = [start]
        pending = [iter(sorted(edges.get(start, ())))]
        while pending:
            following = next(pending[-1], None)
            if following is None:
                pending.pop()
                done.add(path.pop())
            elif following in path:
                return [*path[path.index(following) :], following]
            elif following not in done:
                path.append(following)
                pending.append(iter(sorted(edges.get(following, ()))))
    return None


def cycle_message(cycle: list[str]) -> str:
    return (
        "These dependencies would make a cycle: "
        + " → ".join(cycle)
        + " (each stack reads the outputs of the next). Remove one of them."
    )


def output_origin(output: str, stack: str, serial: int) -> str:
    """Where a dependency variable's value came from, as the run's configuration records it."""
    return f"output {output} of stack {stack}, state serial {serial}"


def missing_output_reason(output: str, stack: str, serial: int | None) -> str:
    where = f"its current state (serial {serial})" if serial is not None else "it has no state yet"
    return (
        f"This stack reads output '{output}' of stack '{stack}', but {where} has no output "
        f"'{output}': apply '{stack}' with that output first, or change the dependency."
    )


def changed_outputs(before: Mapping[str, Any], after: Mapping[str, Any], read: Iterable[str]) -> list[str]:
    """The outputs of `read` whose value (or presence) differs between two states' outputs
    (name → {"value", …}, as Terraform stores them)."""
    changed = []
    for name in sorted(set(read)):
        old, new = before.get(name), after.get(name)
        old_value = old.get("value") if isinstance(old, dict) else None
        new_value = new.get("value") if isinstance(new, dict) else None
        if (old is None) != (new is None) or old_value != new_value:
            changed.append(name)
    return changed
