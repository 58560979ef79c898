"""An executor's phase against the real terraform: its log, its result and prepared applies."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx

from firstlume.executor.client import ExecutorClient
from firstlume.executor.phase import PREPARED_NOTE, PhaseRunner
from test_executor_phase import GOOD_SPEC, ControlPlane, _plan_download, run_phase


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
    """Takes the plan upload; answers the rest as ControlPlane does."""

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1/executor")
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


class PreparedPlane(ControlPlane):
    """A prepared apply's control plane: `GET /plan` answers once `begin` is set (the apply
    began), or 401 when `refuse` is (the run went another way). Notes what the executor had
    done by then: the requests it had sent, and whether its checkout was initialized."""

    def __init__(self, spec: dict[str, Any], plan: dict[str, Any], work: Path) -> None:
        super().__init__(spec, plan)
        self.work = work
        self.refuse = False
        self.wait_for_init = True
        self.before_plan: list[tuple[str, str]] = []
        self.initialized_before_plan = False

    async def handle_async(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1/executor")
        if path == "/plan" and request.method == "GET":
            # Asked for at once, answered (as the control plane does) once the apply begins:
            # here once the prepared init has recorded its backend, or after 10 s.
            initialized = self.work / "checkout" / ".terraform" / "terraform.tfstate"
            deadline = asyncio.get_running_loop().time() + (10 if self.wait_for_init else 0)
            # A file another process (Terraform) writes: there is no event to wait on.
            while not initialized.is_file() and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            self.initialized_before_plan = initialized.is_file()
            self.before_plan = [(method, p) for method, p, _ in self.requests if p != "/plan"]
            if self.refuse:
                error = {
                    "code": "unauthenticated",
                    "message": "This executor token is not valid, or its phase has ended.",
                }
                return httpx.Response(401, json={"error": error})
        return self.handle(request)


def _prepared_apply(tmp_path: Path, plan_changes: dict[str, Any]) -> PreparedPlane:
    from support.git_repos import make_repo

    main_tf = 'terraform {\n  backend "local" {\n    path = "state.tfstate"\n  }\n}\n'
    url, planned = make_repo(tmp_path / "repo", {"main.tf": main_tf})
    spec = {
        **GOOD_SPEC,
        "phase": "apply",
        "prepared": True,
        "stack": {**GOOD_SPEC["stack"], "repository": url},
        "commit_sha": planned,
        "variables": [{"name": "TF_LOG_PATH_UNUSED", "value": "a", "kind": "env", "origin": "stack"}],
    }
    plan = {**_plan_download(planned), "log_offset": 12, "variables": spec["variables"], **plan_changes}
    return PreparedPlane(spec, plan, tmp_path / "work")


async def _run_prepared(plane: PreparedPlane) -> Any:
    client = ExecutorClient("http://cp", "token", transport=httpx.MockTransport(plane.handle_async))
    async with client:
        env = {**os.environ, "FIRSTLUME_PHASE": "apply"}
        return await PhaseRunner(client, plane.work, base_env=env).run()


async def test_a_prepared_apply_inits_before_its_apply_begins_and_reports_nothing_until_then(
    tmp_path: Path, terraform_binary: str
) -> None:
    plane = _prepared_apply(tmp_path, {})

    await _run_prepared(plane)

    # Before its apply began, the executor had asked for its spec and its plan, and sent nothing.
    assert sorted(plane.before_plan) == [("GET", "/spec")]
    assert plane.initialized_before_plan
    # Its log starts where the plan download said, with the held checkout and init under the
    # apply's headings, in the order an apply's log has them; init ran once.
    [first_log, *_] = [body for _, path, body in plane.requests if path == "/logs"]
    assert first_log["offset"] == 12 and first_log["step"] == "apply"
    lines = plane.log.splitlines()
    assert lines[:5] == [
        "--- checkout",
        f"Plan file verified (SHA-256 {plane.plan['sha256']})",
        PREPARED_NOTE,
        f"Cloning {plane.spec['stack']['repository']} at commit {plane.spec['commit_sha']}",
        f"Checked out {plane.spec['commit_sha']}: Initial commit (Ada Lovelace <ada@example.com>)",
    ]
    assert lines.index("--- init") < lines.index("--- apply")
    assert plane.log.count("Terraform has been successfully initialized!") == 1
    assert "init again" not in plane.log
    # The (made-up) plan file fails in Terraform: the apply itself ran, after the prepared init.
    assert plane.finished()["status"] == "failed" and "apply" in plane.finished()["error"]


async def test_a_prepared_apply_inits_again_when_the_plans_lock_file_or_environment_differs(
    tmp_path: Path, terraform_binary: str
) -> None:
    plane = _prepared_apply(tmp_path, {})
    assert plane.plan is not None
    plane.plan["variables"] = [{**plane.spec["variables"][0], "value": "changed after the plan's spec"}]

    await _run_prepared(plane)

    assert plane.initialized_before_plan
    assert "The plan's lock file or environment is not what the apply prepared with: init again" in plane.log
    assert plane.log.count("Terraform has been successfully initialized!") == 2


async def test_a_prepared_apply_whose_run_went_another_way_stops_without_a_word(
    tmp_path: Path, terraform_binary: str
) -> None:
    plane = _prepared_apply(tmp_path, {})
    plane.refuse = True

    outcome = await _run_prepared(plane)

    assert (outcome.status, outcome.exit_code) == (None, 2)
    assert plane.initialized_before_plan
    # Nothing reached the control plane but the spec and the wait: no log, report or result.
    assert sorted((method, path) for method, path, _ in plane.requests) == [("GET", "/spec")]


async def test_a_prepared_apply_whose_preparation_failed_does_it_all_again_once_its_apply_begins(
    tmp_path: Path, terraform_binary: str
) -> None:
    plane = _prepared_apply(tmp_path, {})
    # The stack's path is in no commit: the preparation fails after its checkout, silently.
    plane.spec["stack"] = {**plane.spec["stack"], "path": "absent"}
    plane.wait_for_init = False  # there will be none

    await _run_prepared(plane)

    assert sorted(plane.before_plan) == [("GET", "/spec")]  # nothing reported of the failure
    lines = plane.log.splitlines()
    assert PREPARED_NOTE not in lines
    assert lines[:3] == [
        "--- checkout",
        f"Plan file verified (SHA-256 {plane.plan['sha256']})",
        f"Cloning {plane.spec['stack']['repository']} at commit {plane.spec['commit_sha']}",
    ]
    assert "does not exist in commit" in plane.finished()["error"]
