"""Stack dependencies and the dependency graph (adoption-api.md, section 9) in GraphQL."""

from __future__ import annotations

import strawberry

import firstlume.api.graphql.enums  # noqa: F401  (RunStatus as a GraphQL enum)
from firstlume.domain.runs import RunStatus
from firstlume.services.dependencies import config


@strawberry.type(description="An output of the upstream stack, and the variable that receives its value.")
class OutputMapping:
    output: str
    variable: str


@strawberry.type(description="One stack reading outputs of another.")
class Dependency:
    stack: str = strawberry.field(description="The other stack: the upstream one, or the dependent.")
    outputs: list[OutputMapping]


@strawberry.type(description="The stacks a stack reads outputs of, and the stacks that read its outputs.")
class StackDependencies:
    depends_on: list[Dependency]
    dependents: list[Dependency]


@strawberry.type(description="A stack of the dependency graph, with its last run's status.")
class DependencyNode:
    stack: str
    name: str
    last_run_id: strawberry.ID | None
    last_run_status: RunStatus | None


@strawberry.type(description="`downstream` reads `outputs` of `upstream`.")
class DependencyEdge:
    upstream: str
    downstream: str
    outputs: list[OutputMapping]


@strawberry.type
class DependencyGraph:
    nodes: list[DependencyNode]
    edges: list[DependencyEdge]


def _mappings(outputs: dict[str, str]) -> list[OutputMapping]:
    return [OutputMapping(output=o, variable=v) for o, v in outputs.items()]


def dependencies_of(found: config.StackDependencies) -> StackDependencies:
    return StackDependencies(
        depends_on=[Dependency(stack=e.upstream, outputs=_mappings(e.outputs)) for e in found.depends_on],
        dependents=[Dependency(stack=e.stack, outputs=_mappings(e.outputs)) for e in found.dependents],
    )


def graph_of(graph: config.Graph) -> DependencyGraph:
    return DependencyGraph(
        nodes=[
            DependencyNode(
                stack=n.stack,
                name=n.name,
                last_run_id=strawberry.ID(n.last_run_id) if n.last_run_id else None,
                last_run_status=RunStatus(n.last_run_status) if n.last_run_status else None,
            )
            for n in graph.nodes
        ],
        edges=[
            DependencyEdge(upstream=e.upstream, downstream=e.stack, outputs=_mappings(e.outputs))
            for e in graph.edges
        ],
    )
