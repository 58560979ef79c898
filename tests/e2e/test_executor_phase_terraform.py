"""An executor's phase against the real terraform: its log and its result."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx

from test_executor_phase import GOOD_SPEC, ControlPlane, run_phase


async def plan_empty_configuration(kind: type[ControlPlane], tmp_path: Path) -> tuple[Any, Any]:
    """A plan phase of an empty configuration with real Terraform against a `kind` of stand-in
    control plane: (the plane, the phase's outcome)."""
    from support.git_repos import make_repo

    url, _ = make_repo(tmp_path / "repo", {"main.tf": "terraform {}\n"})
    plane = kind({**GOOD_SPEC, "stack": {**GOOD_SPEC["stack"], "repository": url}})
    return plane, await run_phase(plane, tmp_path / "work", dict(os.environ))


class RefusesSteps(ControlPlane):
    """Refuses every step report (as if the run had moved on) and takes the plan."""

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1/executor")
        if path == "/reports":
            self.requests.append((request.method, path, json.loads(request.content)))
            error = {
                "code": "step_out_of_order",
                "message": "Report 0 (step): Step 'checkout' is failed (test).",
            }
            return httpx.Response(409, json={"error": error})
        if path == "/plan" and request.method == "POST":
            self.requests.append((request.method, path, None))
            return httpx.Response(200, json={"summary": None, "has_changes": False})
        return super().handle(request)


async def test_a_phase_whose_reports_failed_does_not_end_its_last_step_by_name(
    tmp_path: Path, terraform_binary: str
) -> None:
    # The plan itself succeeds (real Terraform, an empty configuration), but the control plane
    # refused the step reports, so the phase fails: its finish names no last step, whose start
    # the control plane never took (the failure ends every running step anyway).
    plane, _ = await plan_empty_configuration(RefusesSteps, tmp_path)

    assert ("POST", "/plan", None) in plane.requests  # the plan step's work was done
    finished = plane.finished()
    assert finished["status"] == "failed" and finished.get("last_step") is None


class TakesThePlan(ControlPlane):
    """Takes the plan upload; answers the rest as ControlPlane does, except that it refuses the
    log batches sent after the upload until the phase's result: the plan step's last text must
    still be unshipped when the phase ends, so that the result carries it. Without this, what
    the tests below check depended on the machine's load: the shipper's 0.1 s timer could fire
    between the last line and the end of the phase, and then no result carried text."""

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1/executor")
        seen = {p for _, p, _ in self.requests}
        if path == "/logs" and "/plan" in seen and "/finish" not in seen:
            error = {"code": "busy", "message": "Not now (test): send it again later."}
            return httpx.Response(409, json={"error": error})
        if path == "/plan" and request.method == "POST":
            self.requests.append((request.method, path, None))
            return httpx.Response(200, json={"summary": None, "has_changes": False})
        return super().handle(request)


async def test_the_result_carries_the_logs_last_text(tmp_path: Path, terraform_binary: str) -> None:
    # Real Terraform, an empty configuration: the plan phase ends well, its last step with it.
    plane, _ = await plan_empty_configuration(TakesThePlan, tmp_path)

    finished = plane.finished()
    assert finished["last_step"] == "plan" and finished["log"]["step"] == "plan"
    assert "Plan recorded: no changes" in finished["log"]["text"]  # written after the upload
    shipped = [body["text"] for _, path, body in plane.requests if path == "/logs"]
    assert "".join(shipped) + finished["log"]["text"] == plane.log  # each character once, in order
    assert plane.requests[-1][1] == "/finish"


class LosesTheLogsEnd(TakesThePlan):
    """Forgets the log as it ends the first result that carries text, and refuses that result
    (409 log_gap, as a control plane whose log lost text does); takes the rest."""

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1/executor")
        body = json.loads(request.content) if request.content else None
        if path == "/finish" and body.get("log") and not any(p == "/finish" for _, p, _ in self.requests):
            self.requests.append((request.method, path, body))
            self.log = ""
            error = {"code": "log_gap", "message": "The log ends at 0.", "expected_offset": 0}
            return httpx.Response(409, json={"error": error})
        if path == "/logs" and body["offset"] > len(self.log):
            self.requests.append((request.method, path, body))
            end = len(self.log)
            error = {"code": "log_gap", "message": f"The log ends at {end}.", "expected_offset": end}
            return httpx.Response(409, json={"error": error})
        return super().handle(request)


async def test_a_log_gap_at_the_result_ships_the_whole_log_then_reports_alone(
    tmp_path: Path, terraform_binary: str
) -> None:
    plane, outcome = await plan_empty_configuration(LosesTheLogsEnd, tmp_path)

    finishes = [body for _, path, body in plane.requests if path == "/finish"]
    assert len(finishes) == 2 and finishes[0]["log"] is not None and finishes[1]["log"] is None
    assert finishes[1]["last_step"] == "plan" and outcome.status == "succeeded"
    # The text the refused result carried went on its own, where the control plane's log ends
    # (text it acknowledged earlier is not held any more: the shipper continues, never a gap).
    after = plane.requests[[path for _, path, _ in plane.requests].index("/finish") + 1 :]
    # Refused at its old offset, then sent where the control plane's log ends.
    assert [path for _, path, _ in after] == ["/logs", "/logs", "/finish"], after
    resent = after[1][2]
    assert (resent["offset"], resent["text"]) == (0, finishes[0]["log"]["text"])
    assert plane.log == finishes[0]["log"]["text"] and plane.log.endswith("Plan recorded: no changes\n")
