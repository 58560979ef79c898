"""The changes of a plan, by resource, from `terraform show -json` output. Pure: no I/O.

`changes_from_plan` reads `resource_changes` once and keeps, per managed resource that really
changes, only what the run page and the API show: the address, the action, the attributes that
change (with sensitive and unknown values masked), what forces a replacement, and the order of a
replacement's two stages.

Actions (`change.actions` in the plan):

- `["delete"]` → delete; `["create"]` → create; `["update"]` → update;
- `["delete", "create"]` → replace, deleting first; `["create", "delete"]` → replace with
  `create_before_destroy`, creating first (`stage_order` keeps that order);
- `["no-op"]`, `["read"]` and every data-source change (`mode == "data"`) are not listed;
- `"forget"` (Terraform 1.7+ `removed { lifecycle { destroy = false } }`) removes the object from
  the state and leaves it alive, so it is **not** a destroy and is never listed as one:
  `["forget"]` is skipped, and `["create", "forget"]` (replaced, old object kept) lists as a create.

Sensitive values never leave this module. Every value under a `before_sensitive` /
`after_sensitive` mark, at any depth, becomes `"(sensitive)"`. Real Terraform does not always
carry the marks along: `terraform_data.output` copies a sensitive `input` but its mark is lost in
the state, so the plan shows the secret unmarked under `before.output`. So, as a second line of
defence, every string or number that the plan marks sensitive anywhere (resources, outputs,
sensitive root variables) is collected first, and any shown leaf equal to one of them is masked
too; a shown string that *contains* the value of a sensitive root variable (4 characters or more)
is masked as well. The same goes for the values Firstlume itself holds as sensitive (`secrets`),
and for each leaf of a JSON-valued one, used by a Terraform variable that is not declared
sensitive. Map keys are shown as they are (Terraform never marks keys).

Whether a sensitive value changed is still told, without the value: where both sides of a key are
masked, the SHA-256 digests of the two values are compared here, and the `after` side reads
`"(sensitive value changed)"` when they differ (both stay `"(sensitive)"` when they do not, so an
unchanged secret folds away with the other unchanged keys).

`replaced_because` joins path steps with "." and writes integer steps as `[0]`:
`[["network", 0, "name"]]` → `"network[0].name"`. Replacements that no attribute forces get a
reason text instead (`REASON_TEXTS`).

A deposed object (left over from a failed `create_before_destroy`) is deleted under the same
address as the current object, so its change is named `"<address> (deposed object <key>)"`,
as Terraform's own plan output does, to keep addresses unique.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

SENSITIVE = "(sensitive)"
SENSITIVE_CHANGED = "(sensitive value changed)"
UNKNOWN = "(known after apply)"

GROUPS: tuple[tuple[str, str], ...] = (
    ("delete", "Will be deleted"),
    ("replace", "Will be replaced"),
    ("update", "Will be updated"),
    ("create", "Will be created"),
)

# `action_reason` values of a replacement that no attribute path explains.
REASON_TEXTS: dict[str, str] = {
    "replace_by_request": "replacement requested",
    "replace_because_tainted": "tainted",
    "replace_by_triggers": "replace_triggered_by",
}

# Shortest sensitive-variable value that is also searched for inside longer strings.
MIN_SUBSTRING_SECRET = 4


# Not frozen: a plan of 10,000 resources makes 60,000 of these, and a frozen dataclass's
# __init__ (object.__setattr__ per field) took three times as long. Not slotted either: orjson
# writes a dataclass that keeps its fields in a __dict__ twice as fast (76 against 140 ms for
# the 60,000 of a plan of 10,000 resources), and it is as quick to make.
@dataclass
class AttributeChange:
    name: str
    before: Any
    after: Any
    forces_replacement: bool


@dataclass(frozen=True)
class Change:
    address: str
    type: str
    unit: str
    action: str
    attributes: tuple[AttributeChange, ...]
    replaced_because: tuple[str, ...]
    stage_order: tuple[str, ...]


@dataclass(frozen=True)
class OutputChange:
    """A root module output whose value the plan changes: Terraform applies such a plan ("Changes
    to Outputs") to save the new values in the state, even when no resource changes."""

    name: str
    unit: str
    action: str
    before: Any
    after: Any
    sensitive: bool


@dataclass(frozen=True)
class Summary:
    delete: int
    replace: int
    update: int
    create: int
    # Outputs the plan changes: counted apart from the resources (the documented `summary` keeps
    # its four keys), but they are changes all the same: a plan of outputs only is applied.
    outputs: int = 0

    @property
    def text(self) -> str:
        parts = [f"{count} {action}" for action, count in self.as_dict().items() if count]
        if self.outputs:
            parts.append(f"{self.outputs} output change" + ("s" if self.outputs > 1 else ""))
        return " · ".join(parts) if parts else "no changes"

    @property
    def has_changes(self) -> bool:
        return any(self.as_dict().values()) or self.outputs > 0

    def as_dict(self) -> dict[str, int]:
        return {"delete": self.delete, "replace": self.replace, "update": self.update, "create": self.create}


def summarize(changes: Iterable[Change], outputs: int = 0) -> Summary:
    counts = dict.fromkeys(("delete", "replace", "update", "create"), 0)
    for change in changes:
        counts[change.action] += 1
    return Summary(**counts, outputs=outputs)


def group_changes(changes: Iterable[Change]) -> list[tuple[str, str, list[Change]]]:
    """All four groups in `GROUPS` order, even when empty; plan order within a group."""
    by_action: dict[str, list[Change]] = {action: [] for action, _ in GROUPS}
    for change in changes:
        by_action[change.action].append(change)
    return [(action, title, by_action[action]) for action, title in GROUPS]


def classify(actions: Iterable[str]) -> tuple[str, tuple[str, ...]] | None:
    """(action, stage_order) for a plan's `change.actions`, or None when it is not listed."""
    acts = tuple(a for a in actions if a != "forget")  # forget is not a destroy (module docstring)
    if acts == ("delete", "create") or acts == ("create", "delete"):
        return "replace", acts
    if len(acts) == 1 and acts[0] in ("delete", "update", "create"):
        return acts[0], ()
    return None


def changes_from_plan(plan: Mapping[str, Any], unit: str = ".", secrets: Iterable[Any] = ()) -> list[Change]:
    """`secrets`: values Firstlume holds as sensitive (a string, a number, or a JSON value whose
    every leaf is one), masked wherever they show, whether Terraform marks them or not."""
    return list(iter_changes(plan, unit, secrets))


def iter_changes(plan: Mapping[str, Any], unit: str = ".", secrets: Iterable[Any] = ()) -> Iterator[Change]:
    """changes_from_plan one change at a time, for a caller that writes them as they come."""
    resource_changes = plan.get("resource_changes") or ()
    scrub = _Scrubber(plan, secrets)
    for rc in resource_changes:
        if rc.get("mode") == "data":
            continue
        change = rc.get("change") or {}
        kind = classify(change.get("actions") or ())
        if kind is None:
            continue
        action, stage_order = kind
        replace_paths = change.get("replace_paths") or () if action == "replace" else ()
        forcing = {path[0] for path in replace_paths if path and isinstance(path[0], str)}
        address = rc["address"]
        if rc.get("deposed"):
            address = f"{address} (deposed object {rc['deposed']})"
        yield Change(
            address=address,
            type=rc.get("type", ""),
            unit=unit,
            action=action,
            attributes=_attribute_changes(change, forcing, scrub),
            replaced_because=_replaced_because(replace_paths, rc.get("action_reason"), scrub)
            if action == "replace"
            else (),
            stage_order=stage_order,
        )


def output_changes_from_plan(
    plan: Mapping[str, Any], unit: str = ".", secrets: Iterable[Any] = ()
) -> list[OutputChange]:
    """The root module's outputs that the plan creates, updates or deletes (`output_changes`;
    Terraform lists unchanged ones as `["no-op"]`), sorted by name as Terraform prints them. A
    sensitive output shows "(sensitive)" on each side that has a value; any other value is masked
    like a resource's attribute (marks, known secrets) and "(known after apply)" when unknown."""
    scrub = _Scrubber(plan, secrets)
    found = []
    for name, change in sorted((plan.get("output_changes") or {}).items()):
        actions = tuple(change.get("actions") or ())
        if len(actions) != 1 or actions[0] not in ("create", "update", "delete"):
            continue
        before, after = change.get("before"), change.get("after")
        b_sens, a_sens = change.get("before_sensitive"), change.get("after_sensitive")
        unknown = change.get("after_unknown")
        sensitive = _any_true(b_sens) or _any_true(a_sens)
        if sensitive:
            shown_b = SENSITIVE if before is not None else None
            shown_a = SENSITIVE if after is not None or _any_true(unknown) else None
        else:
            shown_b = scrub.plain(before)
            shown_a = scrub.mask(after, None, unknown) if _any_true(unknown) else scrub.plain(after)
        found.append(OutputChange(name, unit, actions[0], shown_b, shown_a, bool(sensitive)))
    return found


def _replaced_because(paths: Iterable[Any], reason: Any, scrub: _Scrubber) -> tuple[str, ...]:
    out: list[str] = []
    for path in paths:
        text = ""
        for step in path:
            if isinstance(step, int) and not isinstance(step, bool):
                text += f"[{step}]"
            else:
                shown = scrub.leaf(str(step))
                text += f".{shown}" if text else shown
        if text and text not in out:
            out.append(text)
    if isinstance(reason, str) and reason in REASON_TEXTS and REASON_TEXTS[reason] not in out:
        out.append(REASON_TEXTS[reason])
    return tuple(out)


def _attribute_changes(
    change: Mapping[str, Any], forcing: set[str], scrub: _Scrubber
) -> tuple[AttributeChange, ...]:
    before = change.get("before")
    after = change.get("after")
    before_obj = before if isinstance(before, dict) else {}
    after_obj = after if isinstance(after, dict) else {}
    b_sens = change.get("before_sensitive")
    a_sens = change.get("after_sensitive")
    a_unknown = change.get("after_unknown")
    both_sides = isinstance(before, dict) and isinstance(after, dict)

    names = set(before_obj) | set(after_obj) | forcing
    if isinstance(a_unknown, dict):
        names.update(k for k, v in a_unknown.items() if _any_true(v))

    # This loop runs for every attribute of every resource (100,000 for a plan of 10,000). Most
    # have no marks, or marks that are empty: for them, a change is a difference of values, and
    # the marks are not looked up at all.
    b_marks, a_marks, u_marks = _children(b_sens), _children(a_sens), _children(a_unknown)
    if b_marks is True or a_marks is True or u_marks is True:
        marked_names = names
    else:
        marked_names = {k for marks in (b_marks, a_marks, u_marks) if marks for k, v in marks.items() if v}
    out: list[AttributeChange] = []
    # Attributes with no marks on either side (most of them) are shown as they are unless they
    # hold a known secret: their values are searched all at once after the loop, and only if
    # one does are they masked one by one.
    unmarked: list[AttributeChange] = []
    for name in sorted(names):
        raw_b = before_obj.get(name)
        raw_a = after_obj.get(name)
        forced = name in forcing
        if name in marked_names:
            bs = True if b_marks is True else b_marks.get(name) if b_marks else None
            as_ = True if a_marks is True else a_marks.get(name) if a_marks else None
            au = True if u_marks is True else u_marks.get(name) if u_marks else None
            # Cheapest tests first, and the marks' walks only where there are marks.
            changed = (
                forced
                or raw_b != raw_a
                or type(raw_b) is not type(raw_a)
                or (au is not None and (au is True or (bool(au) and _any_true(au))))
                or (both_sides and (bs is not None or as_ is not None) and _prune(bs) != _prune(as_))
            )
        else:
            bs = as_ = au = None
            changed = forced or raw_b != raw_a or type(raw_b) is not type(raw_a)
        if not changed:
            continue
        if (
            (not bs or not _any_true(bs))
            and (not as_ or not _any_true(as_))
            and (not au or not _any_true(au))
            and not (type(au) is list and type(raw_a) is list and len(au) > len(raw_a))
        ):
            # No marks, or marks that mark nothing (Terraform writes `{}`, `false` and `[{}, {}]`
            # for most values): shown as if unmarked, as `mask` shows them.
            attribute = AttributeChange(name, raw_b, raw_a, forced)
            unmarked.append(attribute)
            out.append(attribute)
            continue
        shown_b, shown_a = _shown_sides(scrub, raw_b, raw_a, bs, as_, au)
        out.append(AttributeChange(name, shown_b, shown_a, forced))
    if unmarked and not scrub.shows_nothing_secret([side for a in unmarked for side in (a.before, a.after)]):
        for attribute in unmarked:
            attribute.before, attribute.after = _shown_sides(scrub, attribute.before, attribute.after)
    return tuple(out)


def _shown_sides(
    scrub: _Scrubber, raw_b: Any, raw_a: Any, bs: Any = None, as_: Any = None, au: Any = None
) -> tuple[Any, Any]:
    """An attribute's two sides as shown, masked by their marks (none: only the known secrets
    are masked); where both sides show "(sensitive)", whether the value changed is told."""
    masked = scrub.masked
    shown_b = scrub.plain(raw_b) if bs is None else scrub.mask(raw_b, bs, None)
    before_masked = scrub.masked != masked
    masked = scrub.masked
    shown_a = scrub.plain(raw_a) if as_ is None and au is None else scrub.mask(raw_a, as_, au)
    if before_masked and scrub.masked != masked:
        shown_a = _flag_changed_secrets(shown_b, shown_a, raw_b, raw_a)
    return shown_b, shown_a


def _children(marks: Any) -> Any:
    """Marks read by name: True (everything under it is marked), a dict by name, or None."""
    if marks is True:
        return True
    return marks if isinstance(marks, dict) else None


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _same_secret(raw_b: Any, raw_a: Any) -> bool:
    """Whether a masked value stayed the same. Two strings (most secrets) are compared as they
    are, which tells exactly what their digests would without hashing them (a plan with a secret
    per resource computed its changes about 5% faster); anything else by its canonical JSON,
    where 1 and 1.0, or true and 1, differ as they do for Terraform."""
    if type(raw_b) is str and type(raw_a) is str:
        return raw_b == raw_a
    return _digest(raw_b) == _digest(raw_a)


def _flag_changed_secrets(shown_b: Any, shown_a: Any, raw_b: Any, raw_a: Any) -> Any:
    """`shown_a` with SENSITIVE_CHANGED wherever both sides are masked and the values differ
    (`_same_secret`); the values themselves are never part of the result."""
    if shown_b == SENSITIVE and shown_a == SENSITIVE:
        return SENSITIVE if _same_secret(raw_b, raw_a) else SENSITIVE_CHANGED
    if isinstance(shown_b, dict) and isinstance(shown_a, dict):
        rb = raw_b if isinstance(raw_b, dict) else {}
        ra = raw_a if isinstance(raw_a, dict) else {}
        return {
            k: _flag_changed_secrets(shown_b[k], v, rb.get(k), ra.get(k)) if k in shown_b else v
            for k, v in shown_a.items()
        }
    if isinstance(shown_b, list) and isinstance(shown_a, list):
        rb_list = raw_b if isinstance(raw_b, list) else []
        ra_list = raw_a if isinstance(raw_a, list) else []
        return [
            _flag_changed_secrets(
                shown_b[i] if i < len(shown_b) else None,
                v,
                rb_list[i] if i < len(rb_list) else None,
                ra_list[i] if i < len(ra_list) else None,
            )
            if i < len(shown_b)
            else v
            for i, v in enumerate(shown_a)
        ]
    return shown_a


def _gather(value: Any, texts: list[str], numbers: list[int | float]) -> None:
    """The strings and numbers (not booleans) at the leaves of `value` (a map or a list),
    appended. Its items are Any: a parsed plan, checked by type here."""
    item: Any
    for item in value.values() if type(value) is dict else value:
        kind = type(item)
        if kind is str:
            texts.append(item)
        elif kind is dict or kind is list:
            _gather(item, texts, numbers)
        elif kind is int or kind is float:
            numbers.append(item)


def _any_true(marks: Any) -> bool:
    # Called for every mark of every attribute: loops, not generators, and no call at all for
    # the empty maps and lists that most marks are.
    if marks is True:
        return True
    kind = type(marks)
    if kind is dict:
        values = marks.values()
    elif kind is list:
        values = marks
    else:
        return False
    for value in values:
        if value is True:
            return True
        if value and (type(value) is dict or type(value) is list) and _any_true(value):
            return True
    return False


def _prune(marks: Any) -> Any:
    """A mark structure without its false parts, or None when nothing in it is marked."""
    if marks is True:
        return True
    kind = type(marks)
    if kind is dict:
        kept = {k: p for k, v in marks.items() if v and (p := _prune(v)) is not None}
        return kept or None
    if kind is list:
        items = [_prune(v) if v else None for v in marks]
        return items if any(p is not None for p in items) else None
    return None


class _Scrubber:
    """Masks values: marked sensitive, marked unknown, or equal to a value known to be sensitive."""

    def __init__(self, plan: Mapping[str, Any], known: Iterable[Any] = ()) -> None:
        self.secrets: set[Any] = set()
        # How many "(sensitive)" values have been shown so far: a side that added none has
        # nothing whose change could be told (_flag_changed_secrets).
        self.masked = 0
        for key in ("resource_changes", "resource_drift"):
            for rc in plan.get(key) or ():
                change = rc.get("change") or {}
                self._collect(change.get("before"), change.get("before_sensitive"))
                self._collect(change.get("after"), change.get("after_sensitive"))
        for change in (plan.get("output_changes") or {}).values():
            self._collect(change.get("before"), change.get("before_sensitive"))
            self._collect(change.get("after"), change.get("after_sensitive"))
        declared = ((plan.get("configuration") or {}).get("root_module") or {}).get("variables") or {}
        values = plan.get("variables") or {}
        long_ones: set[str] = set()
        for name, decl in declared.items():
            if isinstance(decl, dict) and decl.get("sensitive"):
                value = (values.get(name) or {}).get("value")
                self._collect(value, True)
                long_ones.update(self._strings(value))
        # Firstlume's own sensitive values: the Terraform variable that takes one need not be
        # declared sensitive, so nothing in the plan marks it.
        for value in known:
            self._collect(value, True)
            long_ones.update(self._strings(value))
        long_ones = {s for s in long_ones if len(s) >= MIN_SUBSTRING_SECRET}
        self.pattern = (
            re.compile("|".join(re.escape(s) for s in sorted(long_ones, key=len, reverse=True)))
            if long_ones
            else None
        )

    def _collect(self, value: Any, marks: Any) -> None:
        if not marks:  # `{}` or false, as for most resources: nothing is marked
            return
        if marks is True:
            if type(value) is str:  # most marked values: a password, a token
                if value:
                    self.secrets.add(value)
            else:
                self.secrets.update(self._leaves(value))
        elif isinstance(marks, dict) and isinstance(value, dict):
            for k, m in marks.items():
                if m and k in value:
                    self._collect(value[k], m)
        elif isinstance(marks, list) and isinstance(value, list):
            for v, m in zip(value, marks, strict=False):
                if m:
                    self._collect(v, m)

    @staticmethod
    def _leaves(value: Any) -> Iterable[Any]:
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                stack.extend(v.values())
            elif isinstance(v, list):
                stack.extend(v)
            elif isinstance(v, str):
                if v:
                    yield v
            elif isinstance(v, int | float) and not isinstance(v, bool):
                yield v

    def _strings(self, value: Any) -> set[str]:
        return {v for v in self._leaves(value) if isinstance(v, str)}

    def leaf(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            if value and (value in self.secrets or (self.pattern is not None and self.pattern.search(value))):
                self.masked += 1
                return SENSITIVE
            if value == SENSITIVE:  # the text itself: it reads as masked all the same
                self.masked += 1
        elif (kind is int or kind is float) and value in self.secrets:
            self.masked += 1
            return SENSITIVE
        return value

    def plain(self, value: Any) -> Any:
        """`value` with nothing marked in it: only the known secrets are masked. Most of a plan
        is unmarked and holds no secret, so a map or list is first searched whole (its leaves
        gathered, then looked up in the set and the pattern at C speed) and, when it holds none,
        shown as it is; only one that does is rebuilt with its secrets masked."""
        if value is None:  # a null side (every attribute of a create's before): nothing to mask
            return value
        kind = type(value)
        if kind is dict or kind is list:
            return value if self.shows_nothing_secret(value) else self.rebuilt(value)
        return self.leaf(value)

    def shows_nothing_secret(self, values: dict[str, Any] | list[Any]) -> bool:
        """Whether `values` (a map or a list) would show as it is: no leaf in it is a known
        secret, holds a long one, or reads "(sensitive)". Its leaves are gathered, then looked
        up in the set and the pattern at C speed. A pattern match across two leaves (joined by
        NUL) only sends the values the slow way, which masks exactly."""
        texts: list[str] = []
        numbers: list[int | float] = []
        _gather(values, texts, numbers)
        return (
            self.secrets.isdisjoint(texts)
            and self.secrets.isdisjoint(numbers)
            and SENSITIVE not in texts
            and (self.pattern is None or self.pattern.search("\x00".join(texts)) is None)
        )

    def rebuilt(self, value: Any) -> Any:
        """`value` copied with every leaf that is a known secret masked."""
        kind = type(value)
        if kind is dict:
            return {k: self.rebuilt(v) for k, v in value.items()}
        if kind is list:
            return [self.rebuilt(v) for v in value]
        return self.leaf(value)

    def mask(self, value: Any, sens: Any, unknown: Any) -> Any:
        if sens is True:
            self.masked += 1
            return SENSITIVE
        if unknown is True:
            return UNKNOWN
        if (
            (not sens or not _any_true(sens))
            and (not unknown or not _any_true(unknown))
            and not (type(unknown) is list and type(value) is list and len(unknown) > len(value))
        ):
            # Marks that mark nothing (Terraform writes `{}` and `[{}, {}]` for most values):
            # the value as if unmarked. Not when unknowns run past the list's end, which adds
            # their places below.
            return self.plain(value)
        if value is None:
            # An unknown value nested in an otherwise unknown-free null: show the known skeleton.
            if isinstance(unknown, dict) and _any_true(unknown):
                value = {}
            elif isinstance(unknown, list) and _any_true(unknown):
                value = []
            else:
                return None
        if isinstance(value, dict):
            sd = sens if isinstance(sens, dict) else None
            ud = unknown if isinstance(unknown, dict) else None
            out = {
                k: self.mask(v, sd.get(k) if sd else None, ud.get(k) if ud else None)
                for k, v in value.items()
            }
            if ud:
                for k, u in ud.items():
                    if k not in out and _any_true(u):
                        out[k] = self.mask(None, sd.get(k) if sd else None, u)
            return out
        if isinstance(value, list):
            sl = sens if isinstance(sens, list) else None
            ul = unknown if isinstance(unknown, list) else None
            items = [
                self.mask(
                    v,
                    sl[i] if sl is not None and i < len(sl) else None,
                    ul[i] if ul is not None and i < len(ul) else None,
                )
                for i, v in enumerate(value)
            ]
            if ul is not None and len(ul) > len(items):
                for i in range(len(items), len(ul)):
                    items.append(self.mask(None, sl[i] if sl is not None and i < len(sl) else None, ul[i]))
            return items
        return self.leaf(value)


def scrubbed_plan(plan: Mapping[str, Any], secrets: Iterable[Any] = ()) -> dict[str, Any]:
    """The whole `show -json` document with every sensitive value "(sensitive)", for policies
    (services/policies): values under a sensitive mark in resource and output changes, and,
    everywhere else (prior state, planned values, variables, configuration), any value equal
    to one marked sensitive or to one of `secrets`, and any string that contains a long one."""
    scrub = _Scrubber(plan, secrets)
    marked = {"resource_changes", "resource_drift", "output_changes", "variables"}
    shown: dict[str, Any] = {k: scrub.plain(v) for k, v in plan.items() if k not in marked}
    for key in ("resource_changes", "resource_drift"):
        if key in plan:
            shown[key] = [_scrubbed_change(rc, scrub) for rc in plan.get(key) or ()]
    if "output_changes" in plan:
        shown["output_changes"] = {
            name: _scrubbed_side(change, scrub) for name, change in (plan.get("output_changes") or {}).items()
        }
    if "variables" in plan:
        declared = ((plan.get("configuration") or {}).get("root_module") or {}).get("variables") or {}
        shown["variables"] = {
            name: {"value": SENSITIVE}
            if isinstance(declared.get(name), dict) and declared[name].get("sensitive")
            else scrub.plain(value)
            for name, value in (plan.get("variables") or {}).items()
        }
    return shown


def _scrubbed_change(rc: Any, scrub: _Scrubber) -> Any:
    if not isinstance(rc, dict):
        return scrub.plain(rc)
    shown = {k: scrub.plain(v) for k, v in rc.items() if k != "change"}
    if "change" in rc:
        shown["change"] = _scrubbed_side(rc["change"], scrub)
    return shown


def _scrubbed_side(change: Any, scrub: _Scrubber) -> Any:
    """A change's before and after with their marked values masked (unknowns are left to
    `after_unknown`, as Terraform writes them)."""
    if not isinstance(change, dict):
        return scrub.plain(change)
    shown = {k: scrub.plain(v) for k, v in change.items() if k not in ("before", "after")}
    for side in ("before", "after"):
        if side in change:
            marks = change.get(f"{side}_sensitive")
            shown[side] = scrub.mask(change[side], marks, None) if marks else scrub.plain(change[side])
    return shown
