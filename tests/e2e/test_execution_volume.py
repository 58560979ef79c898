"""No loss under batching: a real `terraform apply` of 2,000 resources printing 50,000 log lines
through a served control plane; every resource ends done and every line is stored exactly once,
in the order Terraform printed it."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform

RESOURCES = 2000
LINES_EACH = 25  # 2,000 × 25 = 50,000 provisioner lines

MANY = f"""
resource "terraform_data" "r" {{
  count = {RESOURCES}
  input = count.index
  provisioner "local-exec" {{
    command = "for j in $(seq 1 {LINES_EACH}); do echo r${{count.index}}-line-$j; done"
  }}
}}
"""
# What a resource's provisioner printed, as the log shows it: Terraform reads the provisioner's
# output as it comes, so a line can reach the log in two pieces (each with the resource's
# prefix) when the shell's write is split, which happens on a busy machine.
OUTPUT = re.compile(r"^terraform_data\.r\[(\d+)\]: \(local-exec\): (?!Executing: )(.*)$")

# Longer than the suite's 120 s: 2,000 resources and 50,000 log lines through a served control
# plane take about a minute alone, and several while the rest of the suite runs beside it on 2 cores.
pytestmark = [requires_terraform, pytest.mark.timeout(600)]


def test_every_state_and_every_line_of_a_large_apply_arrives_once_and_in_order(
    api: Api, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, MANY)
    api.create_stack("many", repo)
    api.settings("", {"require_approval": False})
    run_id = api.start("many", "apply")

    run = api.wait(run_id, "applied", timeout=540)

    assert run["summary_text"] == f"{RESOURCES} create"
    changes = api.by_address(run_id)
    assert len(changes) == RESOURCES
    assert {c["state"] for c in changes.values()} == {"done"}
    assert run["failed_resources"] == {"count": 0, "addresses": []}

    printed: dict[int, list[str]] = defaultdict(list)
    log = api.log(run_id, "apply")
    for line in log.splitlines():
        match = OUTPUT.match(line)
        if match:
            printed[int(match.group(1))].append(match.group(2))
    # Each resource's lines, exactly once each and in the order its provisioner printed them
    # (joined, so that a line that arrived in pieces counts whole).
    expected = {i: "".join(f"r{i}-line-{j}" for j in range(1, LINES_EACH + 1)) for i in range(RESOURCES)}
    wrong = {i: pieces for i, pieces in printed.items() if "".join(pieces) != expected[i]}
    assert not wrong, f"output per resource: {dict(list(wrong.items())[:3])!r}"
    assert sorted(printed) == list(range(RESOURCES))
    assert api.log(run_id).count("Apply complete! Resources: 2000 added, 0 changed, 0 destroyed.") == 1
