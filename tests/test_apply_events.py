"""Per-resource apply states from the real `terraform apply -json` stream, and edge cases."""

from __future__ import annotations

from typing import Any

from firstlume.domain.apply_events import ApplyTracker, ResourceUpdate, Stage

# --- hand-written messages --------------------------------------------------------------------


def hook(kind: str, address: str, action: str | None = None) -> dict[str, Any]:
    h: dict[str, Any] = {"resource": {"addr": address}}
    if action is not None:
        h["action"] = action
    return {"type": kind, "hook": h}


def diagnostic(summary: str, detail: str = "", address: str | None = None, severity: str = "error") -> dict:
    d: dict[str, Any] = {"severity": severity, "summary": summary, "detail": detail}
    if address is not None:
        d["address"] = address
    return {"type": "diagnostic", "diagnostic": d}


def test_all_start_pending_and_feed_returns_only_what_changed() -> None:
    tracker = ApplyTracker([("a.x", "create", ()), ("a.y", "update", ())])
    assert [u.state for u in tracker.snapshot()] == ["pending", "pending"]
    assert tracker.feed(hook("apply_start", "a.x", "create")) == [ResourceUpdate("a.x", "applying", None, ())]
    assert tracker.feed(hook("apply_progress", "a.x", "create")) == []
    assert tracker.feed(hook("provision_start", "a.x")) == []
    assert tracker.feed({"type": "version"}) == []
    assert tracker.feed(hook("apply_complete", "a.x", "create")) == [ResourceUpdate("a.x", "done", None, ())]
    assert tracker.finish() == [ResourceUpdate("a.y", "not_applied", None, ())]
    assert tracker.finish() == []


def test_stages_follow_the_order_they_ran_not_the_plan() -> None:
    tracker = ApplyTracker([("a.r", "replace", ("delete", "create"))])
    (update,) = tracker.feed(hook("apply_start", "a.r", "create"))
    assert update.stages == (Stage("create", "applying"), Stage("delete", "pending"))
    tracker.feed(hook("apply_complete", "a.r", "create"))
    tracker.feed(hook("apply_start", "a.r", "delete"))
    (update,) = tracker.feed(hook("apply_complete", "a.r", "delete"))
    assert update == ResourceUpdate("a.r", "done", None, (Stage("create", "done"), Stage("delete", "done")))


def test_hooks_for_unlisted_addresses_and_reads_are_ignored() -> None:
    tracker = ApplyTracker([("a.x", "create", ())])
    assert tracker.feed(hook("apply_start", "data.a.d", "read")) == []
    assert tracker.feed(hook("apply_start", "a.x", "read")) == []
    assert tracker.feed(hook("apply_start", "a.other", "create")) == []
    assert tracker.snapshot() == [ResourceUpdate("a.x", "pending", None, ())]


def test_error_diagnostics_without_a_listed_resource_are_run_errors_and_warnings_are_ignored() -> None:
    tracker = ApplyTracker([("a.x", "create", ())])
    assert tracker.feed(diagnostic("Invalid credentials", "The token expired.")) == []
    assert tracker.feed(diagnostic("Failed to read", "no such file", address="data.a.d")) == []
    assert tracker.feed(diagnostic("Deprecated", "old", address="a.x", severity="warning")) == []
    assert tracker.run_errors == [
        "Invalid credentials\n\nThe token expired.",
        "data.a.d: Failed to read\n\nno such file",
    ]
    assert tracker.snapshot()[0].state == "pending"


def test_error_diagnostic_for_a_resource_fails_it_even_without_apply_errored() -> None:
    tracker = ApplyTracker([("a.x", "update", ())])
    tracker.feed(hook("apply_start", "a.x", "update"))
    (update,) = tracker.feed(diagnostic("Boom", address="a.x"))
    assert update == ResourceUpdate("a.x", "failed", "Boom", ())
    assert tracker.finish() == []


def test_several_errors_on_one_resource_are_all_kept() -> None:
    tracker = ApplyTracker([("a.x", "create", ())])
    tracker.feed(hook("apply_errored", "a.x", "create"))
    tracker.feed(diagnostic("One", "first", address="a.x"))
    tracker.feed(diagnostic("Two", address="a.x"))
    assert tracker.snapshot()[0].error == "One\n\nfirst\n\nTwo"


def test_apply_ending_mid_operation_fails_that_resource() -> None:
    tracker = ApplyTracker([("a.r", "replace", ("create", "delete")), ("a.x", "create", ())])
    tracker.feed(hook("apply_start", "a.r", "create"))
    tracker.feed(hook("apply_complete", "a.r", "create"))
    tracker.feed(hook("apply_start", "a.x", "create"))
    by = {u.address: u for u in tracker.finish()}
    assert by["a.x"].state == "failed" and by["a.x"].error
    # Half a replacement, the rest never started: not applied, as the stages show.
    assert by["a.r"] == ResourceUpdate(
        "a.r", "not_applied", None, (Stage("create", "done"), Stage("delete", "not_applied"))
    )


def test_deposed_object_delete_is_routed_after_the_current_objects_delete() -> None:
    deposed = "a.r (deposed object 0badf00d)"
    tracker = ApplyTracker([("a.r", "replace", ("create", "delete")), (deposed, "delete", ())])
    for kind, action in [
        ("apply_start", "create"),
        ("apply_complete", "create"),
        ("apply_start", "delete"),
        ("apply_complete", "delete"),
    ]:
        tracker.feed(hook(kind, "a.r", action))
    assert {u.address: u.state for u in tracker.snapshot()} == {"a.r": "done", deposed: "pending"}
    tracker.feed(hook("apply_start", "a.r", "delete"))
    tracker.feed(hook("apply_errored", "a.r", "delete"))
    tracker.feed(diagnostic("Cannot delete", address="a.r"))
    assert tracker.snapshot()[1] == ResourceUpdate(deposed, "failed", "Cannot delete", ())
