"""The outputs a stack reads from its upstream stacks, as Terraform variables of its plan: read
from each upstream's current managed state when the plan starts, with their origin (output,
stack and state serial) and sensitivity. The plan stores them sealed with its other variables,
and its apply uses those: what the apply applies is what the plan read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.db.models import Stack, StateHead, StateVersion
from firstlume.db.models_dependencies import StackDependency
from firstlume.domain.dependencies import MissingUpstreamOutput, missing_output_reason, output_origin
from firstlume.domain.state import ROOT_UNIT, seal_context


@dataclass(frozen=True, slots=True)
class DependencyInput:
    """A Terraform variable of the dependent's plan; `value` is secret when `sensitive`."""

    name: str
    value: Any
    sensitive: bool
    origin: str


async def state_outputs(
    session: AsyncSession, keyring: KeyRing, stack_id: str, serial: int | None
) -> dict[str, Any]:
    """The root module's outputs (name → {"value", "type", "sensitive"}) of the stack's state
    version `serial`; none for no serial or a version no longer kept."""
    if not serial:
        return {}
    sealed = await session.scalar(
        select(StateVersion.state_sealed)
        .join(StateHead, StateHead.id == StateVersion.head_id)
        .where(StateHead.stack_id == stack_id, StateHead.unit == ROOT_UNIT, StateVersion.serial == serial)
    )
    if sealed is None:
        return {}
    state = json.loads(keyring.decrypt(sealed, seal_context(stack_id, ROOT_UNIT, serial)))
    outputs = state.get("outputs") if isinstance(state, dict) else None
    return outputs if isinstance(outputs, dict) else {}


async def dependency_inputs(
    session: AsyncSession, keyring: KeyRing, stack_id: str, serials: dict[str, int] | None = None
) -> tuple[list[DependencyInput], dict[str, int]]:
    """Each output the stack reads, from its upstream's current state, or from the serial given
    in `serials` (upstream stack id → serial: what an earlier attempt of the plan read); with the
    serials read. MissingUpstreamOutput names the first output its state does not have."""
    rows = await session.execute(
        select(Stack.id, Stack.slug, StackDependency.outputs, StateHead.serial)
        .join(Stack, Stack.id == StackDependency.upstream_stack_id)
        .outerjoin(StateHead, (StateHead.stack_id == Stack.id) & (StateHead.unit == ROOT_UNIT))
        .where(StackDependency.stack_id == stack_id, Stack.deleted_at.is_(None))
        .order_by(StackDependency.position)
    )
    inputs = []
    read: dict[str, int] = {}
    for upstream_id, slug, mapping, current in rows.all():
        serial = (serials or {}).get(upstream_id, current)
        read[upstream_id] = serial or 0
        outputs = await state_outputs(session, keyring, upstream_id, serial)
        for output, variable in mapping.items():
            found = outputs.get(output)
            if not isinstance(found, dict) or "value" not in found:
                raise MissingUpstreamOutput(missing_output_reason(output, slug, serial or None))
            inputs.append(
                DependencyInput(
                    name=variable,
                    value=found["value"],
                    sensitive=found.get("sensitive") is True,
                    origin=output_origin(output, slug, serial or 0),
                )
            )
    return inputs, read
