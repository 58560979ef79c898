"""The README's quick start, line by line, against `make run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.make_run import make_run, shell
from support.waiting import wait_until
from test_readme_quick_start import README, json_pattern, matches, quick_start, string_sequence


def poll_sequence(exports: dict[str, str], command: str, expected: list[str], run: str) -> None:
    """Repeats `command` until it prints the last value; every value seen must be one the README
    names, in the README's order."""
    seen: list[str] = []

    def printed_the_last() -> bool:
        value = json.loads(shell(exports, command, RUN=run))
        assert value in expected, f"{command} printed {value!r}; the README says {expected} (seen {seen})"
        if not seen or seen[-1] != value:
            assert not seen or expected.index(value) > expected.index(seen[-1]), (seen, value)
            seen.append(value)
        return bool(value == expected[-1])

    wait_until(printed_the_last, 180, f"{command} to print {expected[-1]!r}", interval=0.2)


def test_the_readme_quick_start_prints_what_the_readme_shows(tmp_path: Path, terraform_binary: str) -> None:
    start = quick_start(README.read_text())
    with make_run(tmp_path / "data", scheduler=True) as (exports, _):
        run = ""
        log = ""
        for line in start.lines:
            if line.command == "RUN=<the id>":
                assert run, "the README takes the run's id before any command printed one"
                continue
            sample = line.sample
            assert sample is not None, f"the README shows no output for: {line.command}"
            if sample.startswith("{"):
                pattern, partial = json_pattern(sample)
                printed = json.loads(shell(exports, line.command, RUN=run))
                assert matches(pattern, printed, partial), (
                    f"{line.command}\nREADME: {sample}\nprinted: {printed}"
                )
                run = run or printed["id"]
            elif sample.startswith('"'):
                expected, remark = string_sequence(sample)
                assert not remark or remark.startswith("("), sample
                if len(expected) > 1:
                    poll_sequence(exports, line.command, expected, run)
                else:
                    printed = json.loads(shell(exports, line.command, RUN=run))
                    assert printed == expected[0], f"{line.command}\nREADME: {sample}\nprinted: {printed!r}"
            elif "(below)" in sample:
                log = shell(exports, line.command, timeout=300, RUN=run)
            else:
                pytest.fail(f"the README's sample is in no form this test can check: {sample}")

        assert log, "the quick start never shows the log"
        headings = [line for line in log.splitlines() if line.startswith("--- ")]
        assert headings == start.headings, log
        assert log.endswith(start.log_end), f"the log ends with:\n{log[-600:]}"
