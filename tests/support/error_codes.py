"""The error codes of the API: those docs/rest-api.md lists in its table, and those the code can
return (every FirstlumeError subclass plus the codes written as literals in api/). Tests compare
the two, and the HTTP clients of the tests check each error response they see against the table."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "rest-api.md"
API_DIR = ROOT / "backend" / "firstlume" / "api"
BEGIN, END = "<!-- error-codes: begin -->", "<!-- error-codes: end -->"
ROW = re.compile(r"^\|\s*`(?P<code>[a-z_]+)`\s*\|\s*(?P<status>\d{3})\s*\|")
# Where error classes live: importing all of them makes the set of subclasses the same whatever
# the tests imported before.
PACKAGES = ("firstlume.domain", "firstlume.services", "firstlume.api")


@lru_cache(maxsize=1)
def documented_error_codes() -> dict[str, int]:
    """code -> HTTP status, from the table between the error-codes markers of docs/rest-api.md."""
    text = DOCS.read_text()
    assert BEGIN in text and END in text, f"{DOCS} has no error code table ({BEGIN} … {END})"
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    codes: dict[str, int] = {}
    for line in table.splitlines():
        match = ROW.match(line.strip())
        if match:
            assert match["code"] not in codes, f"{match['code']} is listed twice in {DOCS.name}"
            codes[match["code"]] = int(match["status"])
    return codes


def error_classes() -> list[type[Any]]:
    """Every subclass of FirstlumeError in the control plane's packages (the base excluded)."""
    import firstlume.app  # noqa: F401  (the app first: what it imports is what the API can raise)
    from firstlume.domain.errors import FirstlumeError

    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        for module in pkgutil.walk_packages(package.__path__, package_name + "."):
            importlib.import_module(module.name)

    def subclasses(cls: type) -> list[type]:
        return [cls, *(s for c in cls.__subclasses__() for s in subclasses(c))]

    # Only the product's: a class a test defines is no code the API returns.
    found = {
        cls
        for cls in subclasses(FirstlumeError)
        if cls is not FirstlumeError and cls.__module__.startswith("firstlume.")
    }
    return sorted(found, key=lambda cls: (cls.__module__, cls.__qualname__))


def literal_codes(path: Path) -> dict[str, int | None]:
    """Codes written as literals in a module: {"code": "x"} dicts, code="x" keywords and
    error_response(status, "x", …) calls, with the HTTP status when the call names it."""
    found: dict[str, int | None] = {}
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if _is_str(key, "code") and _is_str(value):
                    found.setdefault(value.value, None)  # type: ignore[union-attr]
        elif isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "code" and _is_str(keyword.value):
                    found.setdefault(keyword.value.value, None)  # type: ignore[attr-defined]
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name == "error_response" and len(node.args) >= 2 and _is_str(node.args[1]):
                status = node.args[0]
                http = status.value if isinstance(status, ast.Constant) else None
                found[node.args[1].value] = http  # type: ignore[attr-defined]
    return found


def _is_str(node: ast.AST | None, value: str | None = None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (value is None or node.value == value)
    )


def api_literal_codes() -> dict[str, set[int | None]]:
    codes: dict[str, set[int | None]] = {}
    for path in sorted(API_DIR.rglob("*.py")):
        for code, status in literal_codes(path).items():
            codes.setdefault(code, set()).add(status)
    return codes


def returnable_error_codes() -> dict[str, set[int | None]]:
    """code -> the HTTP statuses it is returned with (None: not known from the source, such as a
    GraphQL error's extensions)."""
    codes: dict[str, set[int | None]] = {}
    for cls in error_classes():
        codes.setdefault(cls.code, set()).add(cls.http_status)
    for code, statuses in api_literal_codes().items():
        codes.setdefault(code, set()).update(statuses)
    return codes


def undocumented_codes_in(response: httpx.Response) -> list[str]:
    """The codes of an error response (REST error.code, GraphQL errors' extensions.code) that the
    table does not list."""
    if "json" not in response.headers.get("content-type", ""):
        return []
    try:
        body = response.json()
    except ValueError:
        return []
    codes: list[str] = []
    if isinstance(body, dict):
        error = body.get("error")
        if response.status_code >= 400 and isinstance(error, dict) and isinstance(error.get("code"), str):
            codes.append(error["code"])
        for graphql_error in body.get("errors") or []:
            code = (
                (graphql_error.get("extensions") or {}).get("code")
                if isinstance(graphql_error, dict)
                else None
            )
            if isinstance(code, str):
                codes.append(code)
    return [code for code in codes if code not in documented_error_codes()]


def _complaint(response: httpx.Response, codes: list[str]) -> str:
    return (
        f"{response.request.method} {response.request.url.path} returned error code(s) {codes} "
        f"that docs/rest-api.md's error code table does not list: add a row there."
    )


def _worth_checking(response: httpx.Response) -> bool:
    # JSON only: a streamed log (or anything else streamed) is never read here.
    is_json = "json" in response.headers.get("content-type", "")
    return is_json and (response.status_code >= 400 or response.request.url.path.endswith("/graphql"))


def check_error_codes(response: httpx.Response) -> None:
    """An httpx response hook (sync clients)."""
    if _worth_checking(response):
        response.read()
        codes = undocumented_codes_in(response)
        assert not codes, _complaint(response, codes)


async def acheck_error_codes(response: httpx.Response) -> None:
    """An httpx response hook (async clients)."""
    if _worth_checking(response):
        await response.aread()
        codes = undocumented_codes_in(response)
        assert not codes, _complaint(response, codes)
