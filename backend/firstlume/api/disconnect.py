"""A client that closes its connection before its request was read whole."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response

log = logging.getLogger("firstlume.api")


def client_left(request: Request) -> Response:
    """The client closed its connection before its request was read whole: nothing was done,
    and nobody is left to answer. An executor does this when it exits with a report in flight
    (its last one carries what is left of the log), so it is a warning of one line, not an error."""
    log.warning("%s %s: the client closed the connection before its request was read; nothing was done",
                request.method, request.url.path)  # fmt: skip
    return Response(status_code=400)
