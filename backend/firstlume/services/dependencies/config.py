"""Setting and reading a stack's dependencies, and the organization's dependency graph."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from firstlume.db.models import Organization, Run, Stack
from firstlume.db.models_dependencies import StackDependency
from firstlume.domain.audit import AuditAction
from firstlume.domain.dependencies import DependencyCycle, cycle_message, find_cycle
from firstlume.domain.errors import NotFound
from firstlume.services import audit
from firstlume.services.commands import SetDependencies
from firstlume.services.context import Actor, Unit
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord


@dataclass(frozen=True, slots=True)
class Edge:
    """`stack` reads `outputs` (output name → variable) of `upstream`."""

    stack: str
    upstream: str
    outputs: dict[str, str]


@dataclass(frozen=True, slots=True)
class StackDependencies:
    depends_on: list[Edge]
    dependents: list[Edge]


@dataclass(frozen=True, slots=True)
class Node:
    stack: str
    name: str
    last_run_status: str | None
    last_run_id: str | None


@dataclass(frozen=True, slots=True)
class Graph:
    nodes: list[Node]
    edges: list[Edge]


async def _edges(session: AsyncSession, org_id: str) -> list[Edge]:
    """Every dependency of the organization's live stacks, by slug, in each stack's order."""
    down, up = aliased(Stack), aliased(Stack)
    rows = await session.execute(
        select(down.slug, up.slug, StackDependency.outputs)
        .join(down, down.id == StackDependency.stack_id)
        .join(up, up.id == StackDependency.upstream_stack_id)
        .where(StackDependency.org_id == org_id, down.deleted_at.is_(None), up.deleted_at.is_(None))
        .order_by(down.slug, StackDependency.position)
    )
    return [Edge(stack=d, upstream=u, outputs=dict(outputs)) for d, u, outputs in rows]


async def set_dependencies(
    unit: Unit, actor: Actor, org: OrganizationRecord, stack: StackRecord, command: SetDependencies
) -> None:
    """Replaces the stack's dependencies, unless that would make a cycle (DependencyCycle) or
    names a stack the organization does not have (NotFound)."""
    session = unit.session
    # One writer of an organization's dependencies at a time: two requests that each add half
    # of a cycle cannot both pass the check. (SQLite's BEGIN IMMEDIATE already serializes.)
    await session.execute(select(Organization.id).where(Organization.id == org.id).with_for_update())
    wanted = [d.stack for d in command.depends_on]
    found = dict(
        (
            await session.execute(
                select(Stack.slug, Stack.id).where(
                    Stack.org_id == org.id, Stack.slug.in_(wanted), Stack.deleted_at.is_(None)
                )
            )
        ).all()
    )
    missing = [slug for slug in wanted if slug not in found]
    if missing:
        raise NotFound(f"No stack '{missing[0]}' in this organization.", field="depends_on")
    graph: dict[str, list[str]] = defaultdict(list)
    for edge in await _edges(session, org.id):
        if edge.stack != stack.slug:
            graph[edge.stack].append(edge.upstream)
    graph[stack.slug] = wanted
    cycle = find_cycle(graph)
    if cycle is not None:
        raise DependencyCycle(cycle_message(cycle), stacks=cycle)
    await session.execute(delete(StackDependency).where(StackDependency.stack_id == stack.id))
    for position, dependency in enumerate(command.depends_on):
        session.add(
            StackDependency(
                org_id=org.id,
                stack_id=stack.id,
                upstream_stack_id=found[dependency.stack],
                outputs=dict(dependency.outputs),
                position=position,
            )
        )
    await session.flush()
    await audit.record(
        session,
        stack,
        AuditAction.DEPENDENCIES_UPDATE,
        f"stack:{stack.slug}",
        # As "output → variable" lines: an output may be called anything, even "token".
        {
            "depends_on": [
                {"stack": d.stack, "outputs": [f"{o} → {v}" for o, v in d.outputs.items()]}
                for d in command.depends_on
            ]
        },
        actor=actor,
    )


async def stack_dependencies(session: AsyncSession, org_id: str, stack_slug: str) -> StackDependencies:
    """The stacks `stack_slug` reads outputs of, and those that read its outputs."""
    edges = await _edges(session, org_id)
    return StackDependencies(
        depends_on=[e for e in edges if e.stack == stack_slug],
        dependents=sorted((e for e in edges if e.upstream == stack_slug), key=lambda e: e.stack),
    )


async def dependency_graph(session: AsyncSession, org_id: str) -> Graph:
    """Every live stack of the organization with its last run's status, and every dependency."""
    last = (
        select(Run.stack_id, func.max(Run.number).label("number"))
        .where(Run.org_id == org_id)
        .group_by(Run.stack_id)
        .subquery()
    )
    rows = await session.execute(
        select(Stack.slug, Stack.name, Run.status, Run.id)
        .outerjoin(last, last.c.stack_id == Stack.id)
        .outerjoin(Run, (Run.stack_id == Stack.id) & (Run.number == last.c.number))
        .where(Stack.org_id == org_id, Stack.deleted_at.is_(None))
        .order_by(Stack.slug)
    )
    nodes = [
        Node(stack=slug, name=name, last_run_status=str(status) if status else None, last_run_id=run_id)
        for slug, name, status, run_id in rows
    ]
    return Graph(nodes=nodes, edges=await _edges(session, org_id))
