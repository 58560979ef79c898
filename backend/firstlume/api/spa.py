"""Serves the built single-page app at / with client-side routes (any unknown path gets index.html).

Text assets (scripts, styles, source maps) go out gzip-compressed to browsers that accept it:
about a third of their size on a slow link. Each is compressed once, on its first request, and
kept: the files never change while the process runs (a new build means a restart), and
compressing at start would cost every in-process test app the work for files it never serves.
"""

from __future__ import annotations

import gzip
import mimetypes
from functools import cache
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import BaseRoute, Route

PLACEHOLDER = """<!doctype html><html><head><meta charset="utf-8"><title>Firstlume</title></head>
<body><h1>Firstlume</h1><p>The web UI has not been built. Run <code>make run</code>, or use the REST API at
<code>/api/v1</code>.</p></body></html>"""

# What gzip shrinks (images and fonts are compressed already); smaller files are not worth it.
COMPRESSIBLE = {".js", ".mjs", ".css", ".html", ".map", ".json", ".svg", ".txt"}
MIN_COMPRESSED_BYTES = 1024
IMMUTABLE = "public, max-age=31536000, immutable"


@cache
def gzipped(path: Path) -> bytes:
    return gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)


def accepts_gzip(request: Request) -> bool:
    accepted = request.headers.get("accept-encoding", "")
    for part in accepted.split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip().lower() in ("gzip", "*"):
            return params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


def asset_response(request: Request, asset: Path, cache_control: str) -> Response:
    headers = {"cache-control": cache_control, "vary": "accept-encoding"}
    if (
        asset.suffix in COMPRESSIBLE
        and asset.stat().st_size >= MIN_COMPRESSED_BYTES
        and accepts_gzip(request)
    ):
        media_type = mimetypes.guess_type(asset.name)[0] or "application/octet-stream"
        body = gzipped(asset)
        headers["content-encoding"] = "gzip"
        return Response(
            b"" if request.method == "HEAD" else body,
            media_type=media_type,
            headers={
                **headers,
                "content-length": str(len(body)),
            },
        )
    return FileResponse(asset, headers=headers)


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
            return asset_response(request, asset, IMMUTABLE if immutable else "no-cache")
        if index is not None:
            return asset_response(request, index, "no-cache")
        return HTMLResponse(PLACEHOLDER)

    return [Route("/{path:path}", serve, methods=["GET", "HEAD"], name="spa")]
