"""Policies as code (adoption-api.md section 8): what each kind of policy defines, and what its
evaluated rules mean for a run. Pure: the engine that evaluates Rego is services/policies.

A plan policy defines `deny` and/or `warn`, sets of messages: a deny fails the run at the end of
its plan, a warning is shown and kept. An approval policy defines `approvals_required` (a number)
and/or `approvers` (a set of "user:<email>" / "group:<name>"), which add to the run's approval
rules: the run needs the largest number any policy asks for, and only people among the
approvers the policies name (on top of the `approvers` setting) may decide on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# A policy's evaluation is stopped after this long, and the run fails (fail closed).
DEFAULT_TIME_LIMIT_S = 2.0
MAX_MESSAGES = 100
MAX_MESSAGE_LENGTH = 2000


class PolicyKind(StrEnum):
    PLAN = "plan"
    APPROVAL = "approval"


class CheckResult(StrEnum):
    PASS = "pass"
    WARN = "warn"
    DENY = "deny"


# The rules each kind of policy may define; a policy defines at least one of its kind's.
RULES: dict[PolicyKind, tuple[str, ...]] = {
    PolicyKind.PLAN: ("deny", "warn"),
    PolicyKind.APPROVAL: ("approvals_required", "approvers"),
}


@dataclass(frozen=True)
class PolicyCheck:
    """One policy's result on one run, as `policy_checks` shows it."""

    policy: str
    kind: PolicyKind
    result: CheckResult
    messages: tuple[str, ...]
    took_ms: int
    # An approval policy's contribution to the run's approval rules (None: it adds nothing).
    approvals_required: int | None = None
    approvers: tuple[str, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "policy": self.policy,
            "kind": self.kind.value,
            "result": self.result.value,
            "messages": list(self.messages),
            "took_ms": self.took_ms,
        }
        if self.kind is PolicyKind.APPROVAL:
            shown["approvals_required"] = self.approvals_required
            shown["approvers"] = list(self.approvers) if self.approvers is not None else None
        return shown


def _message(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text[:MAX_MESSAGE_LENGTH]


def _messages(value: Any) -> tuple[str, ...]:
    """A rule's set of messages (a Rego set arrives as a JSON list; a single value is one)."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    return tuple(sorted({_message(item) for item in items}))[:MAX_MESSAGES]


def failed_check(policy: str, kind: PolicyKind, reason: str, took_ms: int) -> PolicyCheck:
    """An evaluation that errored or ran out of time: a deny with the reason (fail closed)."""
    return PolicyCheck(policy, kind, CheckResult.DENY, (reason,), took_ms)


def check_of(policy: str, kind: PolicyKind, rules: Mapping[str, Any], took_ms: int) -> PolicyCheck:
    """What a policy's evaluated rules (name → JSON value; undefined rules absent) mean."""
    if kind is PolicyKind.PLAN:
        denies, warnings = _messages(rules.get("deny")), _messages(rules.get("warn"))
        if denies:
            return PolicyCheck(policy, kind, CheckResult.DENY, denies, took_ms)
        if warnings:
            return PolicyCheck(policy, kind, CheckResult.WARN, warnings, took_ms)
        return PolicyCheck(policy, kind, CheckResult.PASS, (), took_ms)
    required = rules.get("approvals_required")
    if required is not None and (
        isinstance(required, bool) or not isinstance(required, int | float) or required != int(required)
    ):
        return failed_check(
            policy,
            kind,
            f"policy {policy}: approvals_required must be a whole number, not {_message(required)}",
            took_ms,
        )
    approvers = _approvers(rules.get("approvers"))
    if isinstance(approvers, str):
        return failed_check(policy, kind, f"policy {policy}: {approvers}", took_ms)
    count = max(0, int(required)) if required is not None else None
    if not count and not approvers:
        return PolicyCheck(policy, kind, CheckResult.PASS, (), took_ms)
    return PolicyCheck(
        policy,
        kind,
        CheckResult.PASS,
        (approval_rule_text(count or 1, approvers),),
        took_ms,
        approvals_required=count or 1,
        approvers=approvers,
    )


def _approvers(value: Any) -> tuple[str, ...] | str | None:
    """The principals of an `approvers` rule, or why they are not principals."""
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    wrong = [v for v in items if not isinstance(v, str) or not v.startswith(("user:", "group:"))]
    if wrong:
        return f'approvers must be "user:<email>" or "group:<name>", not {_message(wrong[0])}'
    return tuple(sorted({v.lower() if v.startswith("user:") else v for v in items}))


def approval_rule_text(count: int, approvers: Sequence[str] | None) -> str:
    noun = "approval" if count == 1 else "approvals"
    return f"{count} {noun} from {', '.join(approvers)}" if approvers else f"{count} {noun}"


@dataclass(frozen=True)
class PolicyApprovalRules:
    """What the approval policies add to a run's approval rules."""

    approvals_required: int | None  # None: the policies ask for nothing
    approvers: tuple[str, ...] | None  # None: the policies name nobody (the setting decides)


def approval_rules(checks: Iterable[PolicyCheck]) -> PolicyApprovalRules:
    """The largest number of approvals any policy asks for; the approvers any of them names
    (a person named by one policy may decide)."""
    counts = [c.approvals_required for c in checks if c.approvals_required is not None]
    named = sorted({a for c in checks if c.approvers for a in c.approvers})
    return PolicyApprovalRules(max(counts) if counts else None, tuple(named) if named else None)


def denial(checks: Iterable[PolicyCheck]) -> str | None:
    """The run's error when any policy denies: "policy <name>: <message>", one per line."""
    lines: list[str] = []
    for check in checks:
        if check.result is CheckResult.DENY:
            for message in check.messages:
                prefix = f"policy {check.policy}"
                lines.append(message if message.startswith(prefix) else f"{prefix}: {message}")
    return "\n".join(lines) if lines else None


def approvals_text(given: int, required: int) -> str:
    """How far a run's approval is: "1 of 2"."""
    return f"{given} of {required}"
