"""What the fleet bench checks against what each simulated executor says it sent: log lines
(stored, and as each runLog watcher received them) and resource states (stored, and as each
resourceStates watcher received them). Counts, never assertions: the bench reports them, the
e2e test asserts they are 0."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_RANK = {"pending": 0, "applying": 1, "done": 2}


@dataclass
class Counts:
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0

    def add(self, other: Counts) -> None:
        self.lost += other.lost
        self.duplicated += other.duplicated
        self.out_of_order += other.out_of_order

    def __str__(self) -> str:
        return f"{self.lost} lost, {self.duplicated} duplicated, {self.out_of_order} out of order"


@dataclass
class Sent:
    """Per run: the lines its phases sent, in order, and each resource's states."""

    lines: dict[str, list[str]] = field(default_factory=dict)
    resources: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    executors: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    unreported: list[str] = field(default_factory=list)


def line_key(line: str) -> str:
    """run, phase and number: what identifies a line (its time stamp is not part of it)."""
    return " ".join(line.split(" ", 3)[:3])


def read_records(directory: Path) -> Sent:
    sent = Sent()
    records = [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]
    records.sort(key=lambda r: (r["run_id"], r["phase"] != "plan", r["attempt"]))
    for record in records:
        run = record["run_id"]
        sent.executors[(run, record["phase"], record["attempt"])] += 1
        sent.lines.setdefault(run, []).extend(line_key(line) for line in record["lines"])
        if record["phase"] == "apply":
            sent.resources[run] = record["resources"]
        if record["result"] != "succeeded":  # failed (reported) or nothing reported
            sent.unreported.append(f"{run} {record['phase']} {record['result']}: {record['error']}")
    return sent


def compare_lines(expected: list[str], text: str) -> Counts:
    position = {key: i for i, key in enumerate(expected)}
    received = [line_key(line) for line in text.splitlines() if line.strip()]
    seen = Counter(received)
    counts = Counts(
        lost=sum(1 for key in expected if key not in seen),
        duplicated=sum(n - 1 for n in seen.values() if n > 1),
    )
    last = -1
    for key in received:
        at = position.get(key)
        if at is None:
            continue
        if at < last:
            counts.out_of_order += 1
        last = max(last, at)
    return counts


def compare_states(expected: dict[str, list[str]], connections: list[dict[str, list[str]]]) -> Counts:
    """A watcher may see fewer states than were sent (two changes between its reads show as the
    later one), never one twice on a connection, never going back, and ends with each one's last."""
    counts = Counts()
    for address, sent in expected.items():
        final = sent[-1] if sent else "pending"
        last_seen = None
        for states in connections:
            received = states.get(address, [])
            for a, b in itertools.pairwise(received):
                if a == b:
                    counts.duplicated += 1
                elif STATE_RANK.get(b, 0) < STATE_RANK.get(a, 0):
                    counts.out_of_order += 1
            if received:
                last_seen = received[-1]
        if last_seen != final:
            counts.lost += 1
    return counts


def stored_states(rows: list[Any], sent: Sent) -> Counts:
    """Resource rows in the database: each sent resource's last state, no more, no fewer."""
    stored: dict[str, dict[str, str]] = {}
    for run_id, address, state in rows:
        stored.setdefault(run_id, {})[address] = state
    counts = Counts()
    for run, resources in sent.resources.items():
        for address, states in resources.items():
            if stored.get(run, {}).get(address) != states[-1]:
                counts.lost += 1
    return counts
