"""Per-resource apply states from `terraform apply -json` messages. Pure: no I/O.

What Terraform 1.11 really sends (checked against the real binary with `terraform_data`):

- `apply_start` → `apply_progress` (every 10 s) → `apply_complete` | `apply_errored`, each with
  `hook.resource.addr` (the plan's address, e.g. `module.m.terraform_data.x["a"]`) and
  `hook.action`: `"create"`, `"update"`, `"delete"` (and `"read"` for data sources, which are
  not on the list and are ignored).
- A replacement is reported as two separate operations on the same address: `hook.action` is
  `"delete"` for the destroy stage and `"create"` for the create stage, in the order they run
  (delete first by default, create first with `create_before_destroy`).
- `provision_start` / `provision_progress` / `provision_complete` / `provision_errored` come
  inside the resource's `apply_start` … `apply_errored` window and carry no action; they change
  nothing here.
- The error text of a failed resource is not on `apply_errored`: it arrives afterwards as a
  `diagnostic` message (`diagnostic.severity == "error"`, `diagnostic.address` = the resource,
  text in `summary` and `detail`). Error diagnostics without an address (provider, auth, or
  a failed postcondition, which Terraform reports without one) are run errors; one with an
  address that is not on the list (a data source) is a run error prefixed with that address.
- A deposed object's delete uses the same address as the current object (no deposed key in the
  hook). Changes name it `"<address> (deposed object <key>)"`; a `delete` hook goes to the
  current object when it still has a delete to do, otherwise to its deposed objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PENDING = "pending"
APPLYING = "applying"
DONE = "done"
FAILED = "failed"
NOT_APPLIED = "not_applied"

DEPOSED_MARK = " (deposed object "
INTERRUPTED = "the apply ended while this was being applied"
_HOOK_TYPES = frozenset({"apply_start", "apply_progress", "apply_complete", "apply_errored"})
# Hook actions that never touch a listed change (data source reads, forgets, ephemeral resources).
_IGNORED_ACTIONS = frozenset({"read", "forget", "noop", "no-op", "open", "renew", "close"})


@dataclass(frozen=True)
class Stage:
    action: str
    state: str


@dataclass(frozen=True)
class ResourceUpdate:
    address: str
    state: str
    error: str | None
    stages: tuple[Stage, ...]


class _Entry:
    """One listed change; every operation Terraform runs for it is a slot (two for a replace)."""

    def __init__(self, address: str, action: str, stage_order: tuple[str, ...]) -> None:
        self.address = address
        self.replace = action == "replace"
        order = (stage_order or ("delete", "create")) if self.replace else (action,)
        self.slots: list[list[str]] = [[a, PENDING] for a in order]
        self.started = 0  # slots [0, started) ran, in the order they started
        self.error: str | None = None
        self.failed = False  # an error diagnostic named it

    @property
    def state(self) -> str:
        states = {s for _, s in self.slots}
        if self.failed or FAILED in states:
            return FAILED
        if APPLYING in states:
            return APPLYING
        if states == {DONE}:
            return DONE
        if states == {PENDING}:
            return PENDING
        if PENDING in states:
            return APPLYING  # between the two stages of a replacement
        return NOT_APPLIED  # part done, the rest never ran

    def update(self) -> ResourceUpdate:
        stages = tuple(Stage(a, s) for a, s in self.slots) if self.replace else ()
        return ResourceUpdate(self.address, self.state, self.error, stages)

    def slot(self, action: str, states: tuple[str, ...]) -> list[str] | None:
        for state in states:
            for slot in self.slots:
                if slot[1] == state and slot[0] == action:
                    return slot
        return None

    def start(self, slot: list[str]) -> None:
        slot[1] = APPLYING
        self.slots.remove(slot)
        self.slots.insert(self.started, slot)
        self.started += 1

    def add_error(self, text: str) -> None:
        self.failed = True
        for slot in self.slots:
            if slot[1] == APPLYING:
                slot[1] = FAILED
        if self.error is None:
            self.error = text
        elif text not in self.error:
            self.error = f"{self.error}\n\n{text}"


class ApplyTracker:
    def __init__(self, planned: Iterable[tuple[str, str, tuple[str, ...]]]) -> None:
        self._entries: dict[str, _Entry] = {}
        self._deposed: dict[str, list[_Entry]] = {}
        for address, action, stage_order in planned:
            entry = _Entry(address, action, tuple(stage_order))
            self._entries[address] = entry
            if DEPOSED_MARK in address:
                self._deposed.setdefault(address.split(DEPOSED_MARK, 1)[0], []).append(entry)
        self._run_errors: list[str] = []

    @property
    def run_errors(self) -> list[str]:
        return list(self._run_errors)

    def snapshot(self) -> list[ResourceUpdate]:
        return [entry.update() for entry in self._entries.values()]

    def feed(self, message: Mapping[str, Any]) -> list[ResourceUpdate]:
        kind = message.get("type")
        if kind in _HOOK_TYPES:
            return self._hook(kind, message.get("hook") or {})
        if kind == "diagnostic":
            return self._diagnostic(message.get("diagnostic") or {})
        return []

    @property
    def started(self) -> bool:
        """Whether the apply reached any resource; a stale plan is refused before it does."""
        return any(entry.update().state != PENDING for entry in self._entries.values())

    def finish(self) -> list[ResourceUpdate]:
        """The apply ended: what it started and never finished failed; what it never started
        is not_applied, unless it never started anything, and then everything stays pending."""
        if not self.started:
            return []
        changed = []
        for entry in self._entries.values():
            before = entry.update()
            interrupted = False
            for slot in entry.slots:
                if slot[1] == PENDING:
                    slot[1] = NOT_APPLIED
                elif slot[1] == APPLYING:
                    slot[1] = FAILED
                    interrupted = True
            if interrupted and entry.error is None:
                entry.error = INTERRUPTED
            if (after := entry.update()) != before:
                changed.append(after)
        return changed

    def _candidates(self, address: str) -> list[_Entry]:
        main = self._entries.get(address)
        return ([main] if main else []) + self._deposed.get(address, [])

    def _hook(self, kind: str, hook: Mapping[str, Any]) -> list[ResourceUpdate]:
        address = (hook.get("resource") or {}).get("addr")
        action = hook.get("action")
        if not isinstance(address, str) or action in _IGNORED_ACTIONS:
            return []
        wanted = (PENDING,) if kind == "apply_start" else (APPLYING, PENDING)
        for entry in self._candidates(address):
            slot = entry.slot(str(action), wanted)
            if slot is None:
                continue
            before = entry.update()
            if kind == "apply_start":
                entry.start(slot)
            elif kind == "apply_progress":
                if slot[1] == PENDING:
                    entry.start(slot)
            elif slot[1] == PENDING:  # finished without a start we saw
                entry.start(slot)
                slot[1] = DONE if kind == "apply_complete" else FAILED
            else:
                slot[1] = DONE if kind == "apply_complete" else FAILED
            after = entry.update()
            return [after] if after != before else []
        return []

    def _diagnostic(self, diag: Mapping[str, Any]) -> list[ResourceUpdate]:
        if diag.get("severity") != "error":
            return []
        summary = str(diag.get("summary") or "").strip()
        detail = str(diag.get("detail") or "").strip()
        text = f"{summary}\n\n{detail}" if summary and detail else summary or detail or "error"
        address = diag.get("address")
        candidates = self._candidates(address) if isinstance(address, str) else []
        if not candidates:
            full = f"{address}: {text}" if isinstance(address, str) and address else text
            if full not in self._run_errors:
                self._run_errors.append(full)
            return []
        # The resource whose operation just failed and has no error yet, else the current object.
        entry = next(
            (e for e in candidates if e.error is None and any(s == FAILED for _, s in e.slots)),
            candidates[0],
        )
        before = entry.update()
        entry.add_error(text)
        after = entry.update()
        return [after] if after != before else []
