"""The process that evaluates policies (`python -m firstlume.services.policies.worker`), so that
a policy that never ends can be stopped: a thread cannot be killed, a process can.

Reads from stdin one line of JSON, the input, then one line, the policies
(`[{"name", "rules": [...], "rego"}]`). Writes one line `{"ready": true}` once the input is
loaded, then one line per policy, in order: `{"rules": {rule: value}, "took_ms"}` (rules left
undefined are absent) or `{"error": "...", "took_ms"}`. The parent times each line (services/policies/engine.py).
Imports nothing of Firstlume's: it starts in a few tens of milliseconds."""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

import regorus

_WHERE = re.compile(r"-->\s*[^\n]*?:(\d+):(\d+)")
_ERROR = re.compile(r"^error:\s*(.+)$", re.MULTILINE)


def error_text(error: BaseException) -> str:
    """regorus's message on one line: "divide by zero at line 4, column 12" (without the source
    excerpt and the Rust backtrace it prints)."""
    text = str(error).split("Stack backtrace:")[0].strip()
    found, where = _ERROR.search(text), _WHERE.search(text)
    message = found.group(1).strip() if found else " ".join(text.split())
    return f"{message} at line {where.group(1)}, column {where.group(2)}" if where else message


def evaluate(base: Any, name: str, rego: str, rules: list[str]) -> dict[str, Any]:
    engine = base.clone()
    try:
        package = engine.add_policy(f"{name}.rego", rego)
        found: dict[str, Any] = {}
        for rule in rules:
            answer = json.loads(engine.eval_query_as_json(f"{package}.{rule}"))
            results = answer.get("result") or []
            if results:
                found[rule] = results[0]["expressions"][0]["value"]
        return {"rules": found}
    except Exception as error:
        return {"error": error_text(error)}


def main() -> None:
    stdin = sys.stdin.buffer
    base = regorus.Engine()
    base.set_input_json(stdin.readline().decode())
    policies = json.loads(stdin.readline())
    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for policy in policies:
        started = time.perf_counter()
        answer = evaluate(base, policy["name"], policy["rego"], policy["rules"])
        answer["took_ms"] = round((time.perf_counter() - started) * 1000)
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
