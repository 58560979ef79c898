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
    # The built assets are known when the app starts: serving looks names up in this table, so a
    # request path can never reach a file outside the directory.
    files = (
        {p.relative_to(static_dir).as_posix(): p for p in static_dir.rglob("*") if p.is_file()}
        if static_dir.is_dir()
        else {}
    )
    index = files.get("index.html")

    async def serve(request: Request) -> Response:
        asset = files.get(request.path_params.get("path", ""))
        if asset is not None:
            immutable = asset.parent.name == "assets"  # Vite fingerprints these names
            headers = {"cache-control": "public, max-age=31536000, immutable" if immutable else "no-cache"}
            return FileResponse(asset, headers=headers)
        if index is not None:
            return FileResponse(index, headers={"cache-control": "no-cache"})
        return HTMLResponse(PLACEHOLDER)

    return [Route("/{path:path}", serve, methods=["GET", "HEAD"], name="spa")]
