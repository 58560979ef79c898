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
LINE = re.compile(r"^terraform_data\.r\[(\d+)\]: \(local-exec\): r(\d+)-line-(\d+)$")

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

    seen: dict[int, list[int]] = defaultdict(list)
    log = api.log(run_id, "apply")
    for line in log.splitlines():
        match = LINE.match(line)
        if match:
            index, echoed, number = map(int, match.groups())
            assert index == echoed
            seen[index].append(number)
    # Each resource's lines, exactly once each and in the order its provisioner printed them.
    wrong = {i: n for i, n in seen.items() if n != list(range(1, LINES_EACH + 1))}
    assert not wrong, f"lines seen per resource: {wrong!r}; the log around them: " + repr(
        [line for line in log.splitlines() if any(f"r{i}-" in line for i in wrong)][:80]
    )
    assert sorted(seen) == list(range(RESOURCES))
    assert api.log(run_id).count("Apply complete! Resources: 2000 added, 0 changed, 0 destroyed.") == 1
