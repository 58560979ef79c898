"""Every package `npm ci` installs supports the Node.js the README documents: npm warns
(EBADENGINE) for each one that does not, as it did 85 times when the code generator's
dependencies moved to Node 22. The check reads `frontend/package-lock.json`, as npm does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "frontend" / "package-lock.json"

Version = tuple[int, int, int]


def documented_node() -> Version:
    """The oldest Node.js the README's quick start asks for ("Node.js 20.19 or newer")."""
    match = re.search(r"Node\.js (\d+)\.(\d+) or newer", (ROOT / "README.md").read_text())
    assert match, "the README names no Node.js version ('Node.js <major>.<minor> or newer')"
    return int(match.group(1)), int(match.group(2)), 0


def _version(text: str) -> tuple[Version, int]:
    """A version and how many of its parts were given ("20" → 1, "6.*" → 1, "20.19.0" → 3)."""
    parts = [p for p in text.strip().lstrip("v").split(".") if p not in ("*", "x", "X", "")]
    numbers = [int(re.match(r"\d+", p).group(0)) for p in parts]  # type: ignore[union-attr]
    given = len(numbers)
    numbers += [0] * (3 - given)
    return (numbers[0], numbers[1], numbers[2]), given


def _upper(version: Version, given: int) -> Version:
    """The first version past a partial one: "20" → 21.0.0, "20.19" → 20.20.0."""
    if given <= 1:
        return version[0] + 1, 0, 0
    if given == 2:
        return version[0], version[1] + 1, 0
    return version[0], version[1], version[2] + 1


def _comparator(token: str, node: Version) -> bool:
    operator, rest = re.match(r"(>=|<=|>|<|\^|~|=)?\s*(.*)", token).groups()  # type: ignore[union-attr]
    if rest in ("*", ""):
        return True
    version, given = _version(rest)
    if operator == ">=":
        return node >= version
    if operator == ">":
        return node > version
    if operator == "<=":
        return node <= version
    if operator == "<":
        return node < version
    if operator == "^":
        first = next((i for i, part in enumerate(version) if part), 2)
        upper = tuple(p + 1 if i == first else (p if i < first else 0) for i, p in enumerate(version))
        return version <= node < upper
    if operator == "~":
        return version <= node < _upper(version, min(given, 2))
    return version <= node < _upper(version, given)


def satisfies(node: Version, requirement: str) -> bool:
    """npm's (semver's) range grammar, as far as the lock file's `engines.node` use it."""
    for alternative in requirement.split("||"):
        tokens = re.findall(r"(?:>=|<=|>|<|\^|~|=)?\s*[\d*xX][\w.*]*|\*", alternative)
        if all(_comparator(token, node) for token in tokens):
            return True
    return False


def test_the_range_reading_agrees_with_npm() -> None:
    node = (20, 19, 0)
    assert satisfies(node, ">=18") and satisfies(node, ">= 16.0.0") and satisfies(node, "*")
    assert satisfies(node, "^20.19.0 || >=22.12.0") and satisfies(node, "18 || 20 || >=22")
    assert satisfies(node, "6.* || 8.* || >= 10.*") and satisfies(node, "^20.17.0 || >=22.9.0")
    assert not satisfies(node, ">=22.15.0") and not satisfies(node, ">=22.12.0")
    assert not satisfies(node, "^20.19.1 || >=22") and not satisfies(node, "18 || >=22")
    assert not satisfies((20, 20, 2), "^12.20 || >= 14.13 <20")


def test_every_locked_package_supports_the_documented_node() -> None:
    node = documented_node()
    packages = json.loads(LOCK.read_text())["packages"]
    refused = {
        path.removeprefix("node_modules/"): meta["engines"]["node"]
        for path, meta in packages.items()
        if isinstance(meta.get("engines"), dict) and isinstance(meta["engines"].get("node"), str)
        if not satisfies(node, meta["engines"]["node"])
    }
    if refused:
        pytest.fail(
            f"These packages need another Node.js than the README's {'.'.join(map(str, node[:2]))} "
            f"(npm ci warns EBADENGINE for each): {refused}. Pin versions that support it "
            "(frontend/package.json `overrides`) or document the real requirement."
        )
