"""GraphQL queries over HTTP run on an event loop of their own, in a thread of their own.

asyncio runs every ready callback of a loop iteration before it looks at the network again, and
a query that resolves thousands of objects makes hundreds of thousands of them: on the server's
loop, /healthz and every other request would wait seconds behind one large query. On this loop
they wait only for the interpreter to switch threads (every few milliseconds). Only queries come
here: they read through a database engine of this loop and publish nothing; mutations and
subscriptions stay on the server's loop with the pub/sub connection.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

import uvloop
from graphql import FragmentDefinitionNode, OperationDefinitionNode, OperationType, parse

from firstlume.api.graphql.org_root import OrgRoot, Shape, shape_of
from firstlume.domain import json_input
from firstlume.services.context import Context

T = TypeVar("T")


class QueryThread:
    def __init__(self, ctx: Context) -> None:
        # uvloop, like the server's own loop (uvicorn picks it): a page of runs schedules about
        # a hundred callbacks and several socket reads and writes, each cheaper there than on
        # asyncio's selector loop (measured: 5% less CPU per GraphQL query).
        self._loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="graphql-queries", daemon=True)
        # An engine of its own, of the server's kind (api/ builds no database of its own kind).
        self.db = type(ctx.db)(ctx.settings.database_url)
        # The same context but for the database: its engine's connections belong to this loop.
        self.ctx = dataclasses.replace(ctx, db=self.db, relay=None)

    def start(self) -> None:
        self._thread.start()

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """`work` on this thread's loop; the caller's loop stays free while it runs."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._loop))

    async def stop(self) -> None:
        await self.run(self.db.dispose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, 10)
        self._loop.close()


@dataclasses.dataclass(frozen=True)
class QueryRequest:
    """A request for one query operation, as read to route it."""

    # Where it names the organization it is about, if it is about one (org_root.py).
    shape: Shape | None
    variables: object

    def about(self) -> OrgRoot | None:
        return self.shape.about(self.variables) if self.shape is not None else None


def query_request(method: str, body: bytes, params: Mapping[str, str]) -> QueryRequest | None:
    """The request, if it is one query operation (not a mutation or subscription). Anything
    that cannot be read is not: it is refused on the server's loop, as before."""
    try:
        if method == "GET":
            text, name, variables = params.get("query"), None, params.get("variables")
        else:
            data = json_input.loads(body)
            if not isinstance(data, dict):
                return None
            text, name, variables = data.get("query"), data.get("operationName"), data.get("variables")
        if not isinstance(text, str) or not isinstance(name, str | None):
            return None
    except Exception:
        return None
    is_query, shape = _one_query(text, name)
    if not is_query:
        return None
    if shape is not None and isinstance(variables, str):
        # GET's variables are JSON in the query string; they matter only for the shape.
        try:
            variables = json_input.loads(variables)
        except Exception:
            variables = None
    return QueryRequest(shape, variables)


@functools.lru_cache(maxsize=512)
def _one_query(text: str, name: str | None) -> tuple[bool, Shape | None]:
    """Whether the document names one query operation, and its shape. Parsing is most of the
    classification's cost (a sixth of a small query's time on the server's loop); clients send
    the same few documents again and again."""
    try:
        document = parse(text, max_tokens=5000)
    except Exception:
        return False, None
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    chosen = [o for o in operations if name is None or (o.name is not None and o.name.value == name)]
    if len(chosen) != 1 or chosen[0].operation != OperationType.QUERY:
        return False, None
    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    return True, shape_of(chosen[0], fragments)
