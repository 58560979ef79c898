"""The phase runner against a control plane that answers wrongly: the run fails with an error
that names the field, never with a traceback. The control plane is a handler behind
httpx.MockTransport under the real ExecutorClient."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from firstlume.executor.client import ExecutorClient
from firstlume.executor.phase import PhaseRunner

GOOD_SPEC: dict[str, Any] = {
    "run_id": "run-1",
    "phase": "plan",
    "attempt": 1,
    "run_type": "apply",
    "stack": {"slug": "net", "repository": "file:///nowhere", "branch": "main", "path": "."},
    "git_auth": {"https_token": None, "ssh_private_key": None},
    "commit_sha": None,
    "variables": [],
    "log_offset": 0,
    "heartbeat_interval_seconds": 10,
}


class ControlPlane:
    """Answers the protocol's requests, `spec` and `plan` as given; records every request."""

    def __init__(self, spec: dict[str, Any], plan: dict[str, Any] | None = None) -> None:
        self.spec, self.plan = spec, plan
        self.requests: list[tuple[str, str, Any]] = []
        self.log = ""

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1/executor")
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, path, body))
        if path == "/spec":
            return httpx.Response(200, json=self.spec)
        if path == "/plan" and request.method == "GET":
            return httpx.Response(200, json=self.plan)
        if path == "/logs":
            self.log = self.log[: body["offset"]] + body["text"]
            return httpx.Response(200, json={"next_offset": len(self.log)})
        if path == "/finish":
            if body.get("log"):  # the log's last text comes with the result
                self.log = self.log[: body["log"]["offset"]] + body["log"]["text"]
            return httpx.Response(200, json={"status": "failed"})
        return httpx.Response(204)

    def reported(self, kind: str) -> list[dict[str, Any]]:
        """The reports of `kind` the executor sent (POST /reports), in order, without their kind."""
        return [
            {k: v for k, v in report.items() if k != "kind"}
            for _, path, body in self.requests
            if path == "/reports"
            for report in body["reports"]
            if report["kind"] == kind
        ]

    def finished(self) -> dict[str, Any]:
        [body] = [b for method, path, b in self.requests if path == "/finish"]
        return body  # type: ignore[no-any-return]


async def run_phase(plane: ControlPlane, tmp_path: Path, base_env: dict[str, str] | None = None) -> Any:
    """The phase against `plane`; `base_env` is the executor's environment (none by default)."""
    client = ExecutorClient("http://cp", "token", transport=httpx.MockTransport(plane.handle))
    async with client:
        return await PhaseRunner(client, tmp_path, base_env=base_env or {}).run()


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({k: v for k, v in GOOD_SPEC.items() if k != "stack"}, "'stack' is required"),
        ({**GOOD_SPEC, "stack": {"slug": "net"}}, "'stack.repository' is required"),
        ({**GOOD_SPEC, "phase": "destroy"}, "'phase' should be 'plan' or 'apply'"),
        ({**GOOD_SPEC, "variables": [{"name": "a", "value": 1, "kind": "file", "origin": "stack"}]}, "'variables[0].kind'"),
        ({**GOOD_SPEC, "log_offset": -5}, "'log_offset' should be greater than or equal to 0"),
    ],
)  # fmt: skip
async def test_a_malformed_spec_fails_the_run_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict[str, Any], field: str
) -> None:
    plane = ControlPlane(spec)

    outcome = await run_phase(plane, tmp_path)

    assert (outcome.status, outcome.exit_code) == ("failed", 1)
    error = plane.finished()["error"]
    assert error.startswith("the executor could not read its spec: the control plane's answer to GET /spec")
    assert field in error
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("plan", "field"),
    [
        ({"plan_file_b64": "%%%", "sha256": "0" * 64, "lock_file": None, "variables": [], "config_yaml": None, "commit_sha": "abc"}, "'plan_file_b64' must be base64"),
        ({"plan_file_b64": "cGxhbg==", "lock_file": None, "variables": [], "config_yaml": None, "commit_sha": "abc"}, "'sha256' is required"),
        ({"plan_file_b64": "cGxhbg==", "sha256": "0" * 64, "lock_file": None, "variables": [], "config_yaml": None, "commit_sha": "abc", "changes": [{"address": "a"}]}, "'changes[0].action' is required"),
    ],
)  # fmt: skip
async def test_a_malformed_plan_download_fails_the_apply_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], plan: dict[str, Any], field: str
) -> None:
    plane = ControlPlane({**GOOD_SPEC, "phase": "apply", "commit_sha": "abc"}, plan)

    outcome = await run_phase(plane, tmp_path)

    assert (outcome.status, outcome.exit_code) == ("failed", 1)
    error = plane.finished()["error"]
    assert "the control plane's answer to GET /plan is not valid" in error and field in error
    assert {"name": "apply", "status": "failed"} in plane.reported("step")
    assert f"Error: {error}" in plane.log
    assert "Traceback" not in capsys.readouterr().err


async def test_a_push_runs_plan_checks_out_the_pushed_commit_not_the_tip(tmp_path: Path) -> None:
    from support.git_repos import commit_files, make_repo

    url, pushed = make_repo(tmp_path / "repo", {"main.tf": "# pushed\n"})
    commit_files(tmp_path / "repo", {"main.tf": "# newer tip\n"}, "Newer")
    # A path that is in no commit ends the phase right after checkout, naming the commit.
    spec = {
        **GOOD_SPEC,
        "stack": {**GOOD_SPEC["stack"], "repository": url, "path": "absent"},
        "commit_sha": pushed,
    }
    plane = ControlPlane(spec)

    await run_phase(plane, tmp_path / "work")

    [reported] = plane.reported("commit")
    assert reported["sha"] == pushed
    assert f"at commit {pushed}" in plane.log
    assert f"does not exist in commit {pushed}" in plane.finished()["error"]


def _plan_download(commit_sha: str) -> dict[str, Any]:
    plan_file = b"a plan file"
    return {
        "plan_file_b64": base64.b64encode(plan_file).decode(),
        "sha256": hashlib.sha256(plan_file).hexdigest(),
        "lock_file": None,
        "variables": [],
        "config_yaml": None,
        "commit_sha": commit_sha,
        "changes": [],
    }


async def test_an_apply_planned_at_another_commit_fails_so_though_its_clone_started_early(
    tmp_path: Path,
) -> None:
    from support.git_repos import commit_files, make_repo

    url, planned = make_repo(tmp_path / "repo", {"main.tf": "# planned\n"})
    named = commit_files(tmp_path / "repo", {"main.tf": "# newer\n"}, "Newer")
    spec = {
        **GOOD_SPEC,
        "phase": "apply",
        "stack": {**GOOD_SPEC["stack"], "repository": url},
        "commit_sha": named,
    }
    plane = ControlPlane(spec, _plan_download(planned))

    outcome = await run_phase(plane, tmp_path / "work")

    assert (outcome.status, outcome.exit_code) == ("failed", 1)
    assert plane.finished()["error"] == f"the plan was made at commit {planned} but the spec names {named}"
    assert "Checked out" not in plane.log


async def test_an_apply_logs_its_checkout_after_the_plan_it_verified(tmp_path: Path) -> None:
    from support.git_repos import make_repo

    url, planned = make_repo(tmp_path / "repo", {"main.tf": "# planned\n"})
    # A path that is in no commit ends the phase right after checkout.
    stack = {**GOOD_SPEC["stack"], "repository": url, "path": "absent"}
    plane = ControlPlane(
        {**GOOD_SPEC, "phase": "apply", "stack": stack, "commit_sha": planned}, _plan_download(planned)
    )

    await run_phase(plane, tmp_path / "work")

    assert f"does not exist in commit {planned}" in plane.finished()["error"]
    lines = plane.log.splitlines()
    verified = next(i for i, line in enumerate(lines) if line.startswith("Plan file verified"))
    assert lines[verified + 1 : verified + 3] == [
        f"Cloning {url} at commit {planned}",
        f"Checked out {planned}: Initial commit (Ada Lovelace <ada@example.com>)",
    ]


async def test_an_apply_asks_for_its_plan_while_its_spec_is_still_being_answered(tmp_path: Path) -> None:
    # The spec is answered only once the plan has been asked for (or after 10 s): an executor
    # that waited for its spec before asking for its plan would take the 10 s and fail below.
    plane = ControlPlane({**GOOD_SPEC, "phase": "apply", "commit_sha": "abc"}, {"not": "a plan"})
    plan_asked = asyncio.Event()
    order: list[str] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1/executor")
        if path == "/plan" and request.method == "GET":
            plan_asked.set()
        if path == "/spec":
            try:
                await asyncio.wait_for(plan_asked.wait(), 10)
                order.append("spec answered after the plan was asked for")
            except TimeoutError:
                order.append("spec answered alone")
        return plane.handle(request)

    client = ExecutorClient("http://cp", "token", transport=httpx.MockTransport(handle))
    async with client:
        runner = PhaseRunner(client, tmp_path, base_env={"FIRSTLUME_PHASE": "apply"})
        outcome = await runner.run()

    assert order == ["spec answered after the plan was asked for"]
    # The plan asked for ahead is the one the phase used: its error names GET /plan, once.
    assert outcome.status == "failed" and "GET /plan" in plane.finished()["error"]
    assert [path for _, path, _ in plane.requests].count("/plan") == 1


async def test_a_plan_phase_never_asks_for_a_plan(tmp_path: Path) -> None:
    plane = ControlPlane({**GOOD_SPEC, "stack": {**GOOD_SPEC["stack"], "path": "absent"}})
    await run_phase(plane, tmp_path, {"FIRSTLUME_PHASE": "plan"})
    assert "/plan" not in [path for method, path, _ in plane.requests if method == "GET"]


class DownForTheResultAndTheLog(ControlPlane):
    """Answers 503 to the result and to the log, as a control plane going down does; takes the
    rest."""

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1/executor")
        if path in ("/finish", "/logs"):
            self.requests.append((request.method, path, json.loads(request.content)))
            return httpx.Response(503, json={"error": {"code": "unavailable", "message": "down"}})
        return super().handle(request)


async def test_an_applys_last_states_still_go_alone_when_its_result_and_its_log_cannot(
    tmp_path: Path,
) -> None:
    from firstlume.protocol.executor import PhaseResult, ResourceReport

    plane = DownForTheResultAndTheLog(GOOD_SPEC)
    client = ExecutorClient("http://cp", "token", transport=httpx.MockTransport(plane.handle), max_attempts=1)
    async with client:
        runner = PhaseRunner(client, tmp_path, base_env={})
        runner.logs.line("apply", "Apply complete! Resources: 1 added, 0 changed, 0 destroyed.")
        # What an apply hands its result: the states its shipper did not send.
        runner._last_resources = [ResourceReport(address="terraform_data.a", state="done")]  # type: ignore[arg-type]

        outcome = await runner._finish(PhaseResult.SUCCEEDED, None)

    assert outcome.exit_code == 2  # the result did not arrive
    paths = [path for _, path, _ in plane.requests]
    assert paths[:2] == ["/finish", "/logs"]  # the result, then its log on its own: both refused
    [sent] = [body["updates"] for _, path, body in plane.requests if path == "/resources"]
    assert [(u["address"], u["state"]) for u in sent] == [("terraform_data.a", "done")]
