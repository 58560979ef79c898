"""Serves the built single-page app at / with client-side routes (any unknown path gets index.html)."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import BaseRoute, Route

PLACEHOLDER = """<!doctype html><html><head><meta charset="utf-8"><title>Firstlume</title></head>
<body><h1>Firstlume</h1><p>The web UI has not been built. Run <code>make run</code>, or use the REST API at
<code>/api/v1</code>.</p></body></html>"""


def spa_routes(static_dir: Path) -> list[BaseRoute]:
    async def serve(request: Request) -> Response:
        relative = request.path_params.get("path", "")
        candidate = (static_dir / relative).resolve()
        if relative and candidate.is_file() and static_dir.resolve() in candidate.parents:
            return FileResponse(candidate)
        index = static_dir / "index.html"
        if index.is_file():
            return FileResponse(index, headers={"cache-control": "no-cache"})
        return HTMLResponse(PLACEHOLDER)

    return [Route("/{path:path}", serve, methods=["GET", "HEAD"])]
