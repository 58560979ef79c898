"""Subscription events that many subscribers receive alike are executed once, not once each.

graphql-core executes a subscription's selection set again for every subscriber and every event.
A log line followed by 500 `runLog` subscribers was 500 executions of the same selection on the
same chunk: a third of the CPU the line cost. The log tails hand every reader at the same place
the same slice (services/logs.py) and `shared_chunk` makes one payload of it; this executor keeps
the result of a payload of a SHARED_PAYLOADS type per operation text and the variables its
selection uses, and gives it to the next subscriber that asks for it.

Only payload types whose fields are plain data are shared: their result depends on nothing but
the payload and the operation (no viewer, no context, no loader). A result with errors is never
kept: errors are masked per operation (api/graphql/errors.py).
"""

from __future__ import annotations

from collections import OrderedDict
from functools import cached_property, lru_cache
from typing import Any, cast

from graphql import (
    ExecutionResult,
    FieldNode,
    OperationDefinitionNode,
    OperationType,
    VariableNode,
    Visitor,
    visit,
)
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from firstlume.api.graphql.types.runs import LogChunk
from firstlume.services.logs import SHARED_SLICE_CHARS, LogSlice

SHARED_PAYLOADS: tuple[type, ...] = (LogChunk,)
# Payloads whose results are kept, newest last. A payload stays referenced while it is here, so its
# id() names no other object meanwhile. Subscribers at the same offset of a run get the same
# payload within one event loop turn or a few, so a few hundred cover many live runs. Payloads
# are at most SHARED_SLICE_CHARS of text: what is kept stays within 512 × 64 KiB of text.
KEPT_PAYLOADS = 512

_kept: OrderedDict[int, tuple[object, dict[Any, ExecutionResult]]] = OrderedDict()


def shared_chunk(part: LogSlice) -> LogChunk:
    """One LogChunk for every subscriber given this slice (the tails give readers at the same
    place the same slice), so that its result is shared. A long slice (a page of stored log that
    a reader catches up with) is its reader's alone, and is not kept."""
    if len(part.text) > SHARED_SLICE_CHARS:
        return LogChunk.of(part)
    return _kept_chunk(part)


@lru_cache(maxsize=KEPT_PAYLOADS)
def _kept_chunk(part: LogSlice) -> LogChunk:
    return LogChunk.of(part)


class _VariableNames(Visitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def enter_variable(self, node: VariableNode, *_: Any) -> None:
        self.names.add(node.name.value)


def _event_variables(operation: OperationDefinitionNode, fragments: dict[str, Any]) -> frozenset[str]:
    """The variables an event's result can depend on: all but the root fields' arguments, which
    only chose the stream (a subscription field's per-event resolver returns the event itself).
    `fromOffset` differs between viewers of one log; their results are the same."""
    found = _VariableNames()
    for selection in operation.selection_set.selections:
        if isinstance(selection, FieldNode):
            for directive in selection.directives or ():
                visit(directive, found)
            if selection.selection_set is not None:
                visit(selection.selection_set, found)
        else:
            visit(selection, found)
    for fragment in fragments.values():
        visit(fragment, found)
    return frozenset(found.names)


class SharedEventExecutor(StrawberryGraphQLCoreExecutionContext):
    # Set on the executor of one event (a copy of its subscription's) whose result may be shared.
    shares_results = False

    def build_per_event_executor(self, payload: Any) -> SharedEventExecutor:
        # The key is worked out on the subscription's executor, once, before the event's copy.
        shares = self.event_key is not None and isinstance(payload, SHARED_PAYLOADS)
        executor = cast(SharedEventExecutor, super().build_per_event_executor(payload))
        executor.shares_results = shares
        return executor

    def execute_operation(self, serially: bool | None = None) -> Any:
        if not self.shares_results:
            return super().execute_operation(serially)
        payload, key = self.root_value, self.event_key
        entry = _kept.get(id(payload))
        if entry is not None and entry[0] is payload:
            _kept.move_to_end(id(payload))
            known = entry[1].get(key)
            if known is not None:
                return known
        result = super().execute_operation(serially)
        if isinstance(result, ExecutionResult) and not result.errors:
            if entry is None or entry[0] is not payload:
                entry = _kept[id(payload)] = (payload, {})
                while len(_kept) > KEPT_PAYLOADS:
                    _kept.popitem(last=False)
            entry[1][key] = result
        return result

    @cached_property
    def event_key(self) -> tuple[Any, ...] | None:
        """What names this subscription's per-event results; None: they are never shared."""
        operation = self.operation
        if operation.operation != OperationType.SUBSCRIPTION or operation.loc is None:
            return None
        coerced = self.variable_values.coerced
        names = _event_variables(operation, self.fragment_definitions)
        variables = tuple(sorted((name, coerced.get(name)) for name in names))
        try:
            hash(variables)
        except TypeError:  # a list or an input object among them: not worth a canonical form
            return None
        name = operation.name.value if operation.name else None
        return (operation.loc.source.body, name, variables)
