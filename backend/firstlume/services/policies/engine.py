"""The Rego engine behind one small interface, `PolicyEngine`, so that another engine (an OPA
server over HTTP) could replace it.

`RegorusEngine` uses Microsoft's regorus (Rust; Rego v1) through its Python bindings, published on
PyPI as `gordon-to-regorus` (import name `regorus`). Compiling is fast and bounded, and is done
on a thread. Evaluating is not bounded (a policy may loop for ever, and regorus's bindings offer
no execution limit), so it runs in a worker process (worker.py) that is killed when a policy
takes longer than its time limit: the event loop only waits on the worker's pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import regorus

from firstlume.domain.errors import InvalidRequest
from firstlume.domain.policies import DEFAULT_TIME_LIMIT_S

# How long the worker may take to start and load the input (a 10,000-resource plan loads in
# well under a second); the policies' own limits start after it.
WORKER_START_LIMIT_S = 20.0
# All of a run's evaluation together, workers' starts included: the executor's finish request
# waits for it, 30 s at most.
TOTAL_LIMIT_S = 25.0
_WHERE = re.compile(r"-->\s*[^\n]*?:(\d+):(\d+)")
_ERROR = re.compile(r"^error:\s*(.+)$", re.MULTILINE)


class PolicyCompileError(InvalidRequest):
    """A module that does not compile: 422 with the line and column."""

    code = "policy_compile_error"

    def __init__(self, message: str, line: int | None, column: int | None) -> None:
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(
            f"The policy does not compile{where}: {message}", field="rego", line=line, column=column
        )


@dataclass(frozen=True)
class PolicySource:
    name: str
    rego: str
    rules: tuple[str, ...]  # the rules to evaluate (those of the policy's kind)


@dataclass(frozen=True)
class Evaluation:
    """One policy's outcome: its rules' values, or why there are none."""

    policy: str
    rules: dict[str, Any] | None
    error: str | None
    took_ms: int


class PolicyEngine(Protocol):
    def compile(self, name: str, rego: str, rules: Sequence[str]) -> list[str]:
        """Refuses (PolicyCompileError) a module that does not compile; returns which of `rules`
        it defines."""
        ...

    async def evaluate(
        self, policies: Sequence[PolicySource], input_json: bytes, time_limit_s: float = DEFAULT_TIME_LIMIT_S
    ) -> list[Evaluation]:
        """Each policy's outcome, in order; one that takes longer than `time_limit_s` is
        stopped and errs "timed out after <limit> s" (the others are still evaluated)."""
        ...


def _compile_error(error_text: str) -> PolicyCompileError:
    text = error_text.split("Stack backtrace:")[0].strip()
    where = _WHERE.search(text)
    found = _ERROR.search(text)
    message = found.group(1).strip() if found else text.splitlines()[0] if text else "unknown error"
    if where is None:
        return PolicyCompileError(message, None, None)
    return PolicyCompileError(message, int(where.group(1)), int(where.group(2)))


def _package_of(name: str, rego: str) -> tuple[str | None, str | None]:
    """The module's package path, or regorus's error text. The engine is made and dropped here,
    on the calling thread: regorus's engines may not be dropped on another thread, so neither it
    nor an exception whose traceback holds it leaves this function."""
    engine = regorus.Engine()
    try:
        return str(engine.add_policy(f"{name}.rego", rego)), None
    except Exception as error:
        return None, str(error)
    finally:
        del engine


def _compiled(name: str, rego: str, rules: Sequence[str]) -> tuple[list[str], str | None]:
    """Which of `rules` the module defines, or the error text of the first compile error."""
    package, problem = _package_of(name, rego)
    if package is None:
        return [], problem
    defined: list[str] = []
    for rule in rules:
        # Compiling each rule also finds what only the compiler sees (an unknown function).
        text = _program_error(name, rego, f"{package}.{rule}")
        if text is None:
            defined.append(rule)
        elif "not a valid rule path" in text:
            continue  # the module does not define this rule
        elif "not yet supported" in text:
            # The compiler does not know a construct the interpreter evaluates (`walk`, for
            # one): the parse above is the check, and a rule head names the rule.
            if re.search(rf"^{rule}\b", rego, re.MULTILINE):
                defined.append(rule)
        else:
            return [], text
    return defined, None


def _program_error(name: str, rego: str, entry_point: str) -> str | None:
    try:
        program = regorus.Program.compile_from_modules("{}", [(f"{name}.rego", rego)], [entry_point])
    except Exception as error:
        return str(error)
    del program
    return None


def seconds_text(limit: float) -> str:
    return f"{limit:g} s"


class RegorusEngine:
    def compile(self, name: str, rego: str, rules: Sequence[str]) -> list[str]:
        defined, problem = _compiled(name, rego, rules)
        if problem is not None:
            raise _compile_error(problem)
        return defined

    async def evaluate(
        self, policies: Sequence[PolicySource], input_json: bytes, time_limit_s: float = DEFAULT_TIME_LIMIT_S
    ) -> list[Evaluation]:
        if not policies:
            return []
        # A policy that times out takes its worker with it; the policies after it are evaluated
        # by a new one, within what is left of the run's budget.
        budget_ends = time.monotonic() + TOTAL_LIMIT_S
        results: list[Evaluation] = []
        while len(results) < len(policies):
            remaining = policies[len(results) :]
            if time.monotonic() >= budget_ends:
                reason = f"not evaluated: this run's policies took over {seconds_text(TOTAL_LIMIT_S)} in all"
                return results + [Evaluation(p.name, None, reason, 0) for p in remaining]
            results += await _in_a_worker(remaining, input_json, time_limit_s, budget_ends)
        return results


async def _in_a_worker(
    policies: Sequence[PolicySource], input_json: bytes, limit: float, budget_ends: float
) -> list[Evaluation]:
    """The outcomes of `policies` in order, up to and including the first that times out."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "firstlume.services.policies.worker",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=64 * 1024 * 1024,
    )
    try:
        return await _converse(process, policies, input_json, limit, budget_ends)
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        await process.wait()


async def _converse(
    process: asyncio.subprocess.Process,
    policies: Sequence[PolicySource],
    input_json: bytes,
    limit: float,
    budget_ends: float,
) -> list[Evaluation]:
    assert process.stdin is not None and process.stdout is not None
    sources = [{"name": p.name, "rego": p.rego, "rules": list(p.rules)} for p in policies]
    process.stdin.write(input_json.replace(b"\n", b" ") + b"\n" + json.dumps(sources).encode() + b"\n")
    results: list[Evaluation] = []
    try:
        starting = max(0.0, min(WORKER_START_LIMIT_S, budget_ends - time.monotonic()))
        await asyncio.wait_for(process.stdin.drain(), starting)
        process.stdin.close()
        starting = max(0.0, min(WORKER_START_LIMIT_S, budget_ends - time.monotonic()))
        ready = await asyncio.wait_for(process.stdout.readline(), starting)
        if not ready:
            raise ConnectionError("the policy worker ended before it loaded the input")
    except (TimeoutError, ConnectionError, BrokenPipeError) as error:
        reason = f"the policy engine could not start: {error or 'it took too long'}"
        return [Evaluation(p.name, None, reason, 0) for p in policies]
    for index, policy in enumerate(policies):
        started = time.monotonic()
        # Each policy has its limit, and all of them together TOTAL_LIMIT_S: the executor's
        # finish request waits for them, and gives up after its own 30 s.
        allowed = min(limit, max(0.0, budget_ends - started))
        try:
            line = await asyncio.wait_for(process.stdout.readline(), allowed)
        except TimeoutError:
            # The timer of asyncio may end a hair early by the monotonic clock: it ran its limit.
            took = max(int((time.monotonic() - started) * 1000), int(allowed * 1000))
            reason = (
                f"timed out after {seconds_text(limit)}"
                if allowed == limit
                else f"timed out: this run's policies took over {seconds_text(TOTAL_LIMIT_S)} in all"
            )
            return [*results, Evaluation(policy.name, None, reason, took)]
        took = int((time.monotonic() - started) * 1000)
        if not line:
            return results + [
                Evaluation(p.name, None, "the policy engine stopped", took) for p in policies[index:]
            ]
        answer = json.loads(line)
        took = int(answer.get("took_ms", took))
        results.append(Evaluation(policy.name, answer.get("rules"), answer.get("error"), took))
    return results


_ENGINE: PolicyEngine = RegorusEngine()


def engine() -> PolicyEngine:
    """The engine the control plane uses."""
    return _ENGINE
