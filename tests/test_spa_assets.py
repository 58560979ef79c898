"""The web UI's files: text assets go out gzip-compressed to browsers that accept it (issue 48,
item 15), with the caching headers Vite's fingerprinted names allow; everything else as it is."""

from __future__ import annotations

import gzip
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from firstlume.api.spa import spa_routes

SCRIPT = "export const greeting = 'hello from the bundle';\n" * 400  # ~19 KB, like a route chunk


@pytest.fixture
def static(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "index-abc123.js").write_text(SCRIPT)
    (tmp_path / "assets" / "tiny-def456.css").write_text("body{margin:0}")
    (tmp_path / "assets" / "logo-0a1b2c.png").write_bytes(b"\x89PNG" + bytes(4096))
    (tmp_path / "index.html").write_text("<!doctype html><title>Firstlume</title>" + "<!-- x -->" * 200)
    return tmp_path


async def get(static: Path, path: str, encoding: str, method: str = "GET") -> httpx.Response:
    app = Starlette(routes=spa_routes(static))
    headers = {"accept-encoding": encoding}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ui") as client:
        return await client.request(method, path, headers=headers)


async def test_a_script_goes_out_compressed_to_a_browser_that_accepts_gzip(static: Path) -> None:
    response = await get(static, "/assets/index-abc123.js", "gzip, deflate, br")
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    assert response.headers["vary"] == "accept-encoding"
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert response.headers["content-type"].startswith(("text/javascript", "application/javascript"))
    compressed_size = int(response.headers["content-length"])
    assert compressed_size < len(SCRIPT) / 10  # a repetitive script: gzip must shrink it a lot
    # httpx undoes the content-encoding: what the browser gets back is the file, byte for byte.
    assert response.content == SCRIPT.encode()


async def test_without_gzip_in_accept_encoding_the_file_goes_as_it_is(static: Path) -> None:
    for encoding in ("identity", "br", "gzip;q=0", "deflate"):
        response = await get(static, "/assets/index-abc123.js", encoding)
        assert response.status_code == 200
        assert "content-encoding" not in response.headers, encoding
        assert response.content == SCRIPT.encode()


async def test_small_files_and_images_are_not_compressed(static: Path) -> None:
    tiny = await get(static, "/assets/tiny-def456.css", "gzip")
    assert "content-encoding" not in tiny.headers and tiny.text == "body{margin:0}"
    image = await get(static, "/assets/logo-0a1b2c.png", "gzip")
    assert "content-encoding" not in image.headers and image.content.startswith(b"\x89PNG")


async def test_client_routes_get_the_page_compressed_and_never_cached(static: Path) -> None:
    response = await get(static, "/orgs/demo/stacks", "gzip")
    assert response.headers["content-encoding"] == "gzip"
    assert response.headers["cache-control"] == "no-cache"
    assert response.text.startswith("<!doctype html><title>Firstlume</title>")


async def test_head_says_the_compressed_length_and_sends_no_body(static: Path) -> None:
    head = await get(static, "/assets/index-abc123.js", "gzip", method="HEAD")
    assert head.status_code == 200
    assert head.headers["content-encoding"] == "gzip"
    assert int(head.headers["content-length"]) == len(gzip.compress(SCRIPT.encode(), 9, mtime=0))
    assert head.content == b""
