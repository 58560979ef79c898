"""strawberry's extension runner, with what it does for each streamed result decided once per
operation instead of again for every result.

For every message of a subscription, strawberry's runner asks each schema extension for its
results and builds a context manager of each extension's `on_stream_result` hook, although
none of Firstlume's extensions has either: with nine extensions that was a fifth of the CPU a
log line costs 500 `runLog` subscribers (measured: 93 ms a line with them, 74 ms without).
This runner keeps only the extensions that override those hooks. An extension that only acts on
errors (`ACTS_ON_ERRORS_ONLY`, the error masking) is skipped for a result without any: its hook
cost as much as executing the log line's selection again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from strawberry.extensions import SchemaExtension
from strawberry.extensions.context import StreamResultContextManager
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.utils.await_maybe import await_maybe

if TYPE_CHECKING:
    from strawberry.types import ExecutionContext
    from strawberry.types.execution import StreamExecutionResult


def _overrides(extension: SchemaExtension, hook: str) -> bool:
    return getattr(type(extension), hook) is not getattr(SchemaExtension, hook)


class _NoStreamHooks(StreamResultContextManager):
    """What `on_stream_result` gives when no extension has the hook: it does nothing."""

    def __init__(self, result: StreamExecutionResult) -> None:
        self.result = result
        self.hooks = []

    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *_: object) -> None:
        return None


def _has_errors(result: object) -> bool:
    """Errors of the result or of any incremental part of it (what an error masker looks at)."""
    if getattr(result, "errors", None):
        return True
    parts = (*(getattr(result, "incremental", None) or ()), *(getattr(result, "completed", None) or ()))
    return any(getattr(part, "errors", None) for part in parts)


class OncePerOperationRunner(SchemaExtensionsRunner):
    def __init__(
        self, execution_context: ExecutionContext, extensions: list[SchemaExtension] | None = None
    ) -> None:
        super().__init__(execution_context, extensions)
        self._giving_results = [e for e in self.extensions if _overrides(e, "get_results")]
        self._streaming = [e for e in self.extensions if _overrides(e, "on_stream_result")]
        self._streaming_always = [e for e in self._streaming if not getattr(e, "ACTS_ON_ERRORS_ONLY", False)]

    def on_stream_result(self, result: StreamExecutionResult) -> StreamResultContextManager:
        hooks = self._streaming if _has_errors(result) else self._streaming_always
        if not hooks:
            return _NoStreamHooks(result)
        return StreamResultContextManager(hooks, result)

    async def get_extensions_results(self, ctx: ExecutionContext) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for extension in self._giving_results:
            data.update(await await_maybe(extension.get_results()))
        data.update(ctx.extensions_results)
        return data
