"""The README's quick start, as a new user follows it: `make run` (scheduler on, real Terraform),
then each command of its block pasted into a shell, and each sample output it shows (`# → …`,
the log's section headings and the log's end) compared with what the demo really prints. The
samples are read from README.md, not copied here: a README that says "3 create" fails this test."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = "<!-- quick start:"
ELLIPSIS = "…"


@dataclass(frozen=True)
class Line:
    command: str
    sample: str | None  # what follows "# →", if anything


@dataclass(frozen=True)
class QuickStart:
    lines: list[Line]
    headings: list[str]  # the log's sections, in the order the README names them
    log_end: str  # the text block the README says the log ends with


def quick_start(text: str) -> QuickStart:
    after = text.split(MARKER, 1)[1]
    block = re.search(r"```sh\n(.*?)```", after, re.S)
    assert block, "the quick start has no ```sh block after its marker"
    lines = []
    for raw in block.group(1).splitlines():
        command, _, sample = raw.partition("# →")
        lines.append(Line(command.strip(), sample.strip() or None))
    rest = after[block.end() :]
    end = re.search(r"```text\n(.*?)```", rest, re.S)
    assert end, "the quick start shows no ```text block of the log's end"
    prose = rest[: end.start()]
    headings = re.findall(r"`(--- [a-z]+)`", prose)
    return QuickStart(lines, headings, end.group(1))


# Samples: a JSON object with … for what varies, JSON strings in sequence, or "(below)" -----------


def json_pattern(sample: str) -> tuple[dict[str, Any], bool]:
    """The object a sample shows, and whether it is partial (it had a bare … member)."""
    stripped = re.sub(r",\s*…(?=\s*})", "", sample)
    stripped = re.sub(r"(?<={)\s*…\s*,?", "", stripped)
    return json.loads(stripped), stripped != sample


def matches(pattern: Any, actual: Any, partial: bool) -> bool:
    if pattern == ELLIPSIS:
        return True
    if isinstance(pattern, dict):
        if not isinstance(actual, dict) or not set(pattern) <= set(actual):
            return False
        if not partial and set(pattern) != set(actual):
            return False
        return all(matches(v, actual[k], False) for k, v in pattern.items())
    return bool(pattern == actual)


def string_sequence(sample: str) -> tuple[list[str], str]:
    """`"a", "b", then "c" (remark)` → (["a", "b", "c"], "(remark)")."""
    values = []
    rest = sample
    while match := re.match(r'\s*(?:,\s*)?(?:then\s+)?("(?:[^"\\]|\\.)*")', rest):
        values.append(json.loads(match.group(1)))
        rest = rest[match.end() :]
    return values, rest.strip()


def test_the_sample_forms_are_read_as_meant() -> None:
    pattern, partial = json_pattern('{"id": "…", "status": "queued", …}')
    assert (pattern, partial) == ({"id": ELLIPSIS, "status": "queued"}, True)
    assert matches(pattern, {"id": "r1", "status": "queued", "type": "plan"}, partial)
    assert not matches(pattern, {"id": "r1", "status": "planning"}, partial)
    assert not matches({"a": 1}, {"a": 1, "b": 2}, False)
    assert string_sequence('"queued", "planning", then "awaiting_approval"') == (
        ["queued", "planning", "awaiting_approval"],
        "",
    )
    assert string_sequence('"4 create" (on the first run)') == (["4 create"], "(on the first run)")
    # What this test exists for: the README's old sample is not what the demo prints.
    assert string_sequence('"3 create" (on the first run)')[0] != ["4 create"]


def test_the_readme_quick_start_is_found_with_a_sample_on_each_result() -> None:
    start = quick_start(README.read_text())
    assert [line.command.split()[0] for line in start.lines][:2] == ["curl", "RUN=<the"]
    assert sum(line.sample is not None for line in start.lines) == len(start.lines) - 1
    assert start.headings and start.log_end.strip()
