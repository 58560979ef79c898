"""Policies on real runs (adoption-api.md section 8): a served control plane, its scheduler and
local executors, real Git and real Terraform. A plan policy denies deleting a `terraform_data`
whose input says `protected`: the run fails at the end of its plan, before any approval, with
"policy <name>: <message>". A policy that never ends fails its run with "timed out after 2 s"
while /healthz keeps answering."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from support.e2e import Api, StackRepo, make_stack_repo
from support.terraform import requires_terraform
from support.waiting import wait_until

pytestmark = requires_terraform

MAIN = """
resource "terraform_data" "db" {
  input = { protected = true, name = "orders" }
}
resource "terraform_data" "cache" {
  input = { protected = false, name = "cache" }
}
"""
WITHOUT_DB = """
resource "terraform_data" "cache" {
  input = { protected = false, name = "cache" }
}
"""
PROTECT = """package firstlume.protect

deny contains msg if {
  some rc in input.plan.resource_changes
  rc.type == "terraform_data"
  "delete" in rc.change.actions
  rc.change.before.input.protected == true
  msg := sprintf("%s is protected and cannot be deleted", [rc.address])
}

warn contains msg if {
  some rc in input.plan.resource_changes
  "create" in rc.change.actions
  msg := sprintf("%s is new", [rc.address])
}
"""
NEVER_ENDS = """package firstlume.slow

deny contains "never" if {
  some i in numbers.range(1, 1000000000)
  i < 0
}
"""


@pytest.fixture
def repo(tmp_path: Path) -> StackRepo:
    return make_stack_repo(tmp_path, MAIN)


def _create(api: Api, name: str, rego: str) -> None:
    created = api.post("/policies", {"name": name, "kind": "plan", "rego": rego})
    assert created.status_code == 201, created.text


def test_a_deny_fails_the_real_run_at_the_end_of_its_plan_and_a_warn_is_kept(
    api: Api, repo: StackRepo
) -> None:
    _create(api, "protect", PROTECT)
    api.settings("", {"policies": ["protect"]})
    api.create_stack("app", repo)

    # Creating is allowed, with a warning for each new resource, kept on the run.
    first = api.start("app", "apply")
    run = api.wait(first, "awaiting_approval")
    [check] = run["policy_checks"]
    assert check["policy"] == "protect" and check["kind"] == "plan" and check["result"] == "warn"
    assert check["messages"] == ["terraform_data.cache is new", "terraform_data.db is new"]
    assert isinstance(check["took_ms"], int)
    assert run["configuration"]["settings"]["policies"] == {"value": ["protect"], "origin": "organization"}
    api.approve(first)
    api.wait(first, "applied")

    # Deleting the protected resource: the run fails when its plan ends, never awaiting approval.
    repo.commit({"main.tf": WITHOUT_DB}, "Drop the database")
    second = api.start("app", "apply")
    failed = api.wait(second, "failed")
    assert failed["error"] == "policy protect: terraform_data.db is protected and cannot be deleted"
    assert failed["policy_checks"][0]["result"] == "deny"
    assert failed["approval"]["approved_at"] is None
    assert [(s["name"], s["status"]) for s in failed["steps"]][-1] == ("plan", "done")
    assert "approval" not in [s["name"] for s in failed["steps"]]
    assert "terraform_data.db" in repo.resources()  # nothing was applied


def test_a_policy_that_never_ends_fails_the_run_and_the_server_stays_responsive(
    api: Api, repo: StackRepo, server: object
) -> None:
    _create(api, "slow", NEVER_ENDS)
    api.settings("", {"policies": ["slow"]})
    api.create_stack("app", repo)
    run_id = api.start("app", "plan")
    base = api.o.split("/api/v1/")[0]

    # /healthz is probed throughout the evaluation: each answer within a second.
    slowest: list[float] = []
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=5) as http:
            while not done.is_set():
                started = time.monotonic()
                assert http.get(f"{base}/healthz").status_code == 200
                slowest.append(time.monotonic() - started)
                time.sleep(0.05)

    prober = threading.Thread(target=probe)
    # The probes start once the plan is running, so they overlap the policy's evaluation.
    wait_until(lambda: api.run(run_id)["status"] == "planning", 60, "the plan to start", interval=0.05)
    prober.start()
    try:
        failed = api.wait(run_id, "failed", timeout=120)
    finally:
        done.set()
        prober.join()
    assert failed["error"] == "policy slow timed out after 2 s"
    assert failed["policy_checks"][0]["result"] == "deny"
    assert failed["policy_checks"][0]["took_ms"] >= 2000
    assert len(slowest) >= 20 and max(slowest) < 1.0, slowest
