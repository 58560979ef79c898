"""A stalled control plane never holds up the engine."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from firstlume.domain.apply_events import ApplyTracker
from firstlume.executor.resources import ResourceShipper
from firstlume.protocol.executor import ResourceReport
from support.terraform import requires_terraform, terraform_env, write_config
from test_resource_batches import ResourcesEndpoint, client_for

APPLY_TF = """
resource "terraform_data" "r" {
  count = 40
  input = count.index
  provisioner "local-exec" { command = "for i in $(seq 1 50); do echo r${count.index}-line-$i; done" }
}
"""


@requires_terraform
async def test_a_stalled_control_plane_never_holds_up_the_engine(tmp_path: Path) -> None:
    """The control plane answers nothing until the apply is over: the engine still runs to its
    end (its output pipe is drained whatever the network does), then every state goes out."""
    from firstlume.executor.engines import make_engine
    from firstlume.executor.engines.base import engine_environment
    from firstlume.executor.engines.messages import readable_message

    code_dir = write_config(tmp_path / "stack", APPLY_TF)
    env = engine_environment(terraform_env(tmp_path), tmp_path)
    lines: list[str] = []
    engine = make_engine("terraform", code_dir=code_dir, work_dir=tmp_path, env=env, log=lines.append)
    await engine.init()
    await engine.plan(tmp_path / "plan.tfplan", var_file=None, destroy=False)
    tracker = ApplyTracker((f"terraform_data.r[{i}]", "create", ()) for i in range(40))
    endpoint = ResourcesEndpoint()
    endpoint.release.clear()
    shipper = ResourceShipper(client_for(endpoint), interval=0.01, max_batch=5)
    await shipper.start()
    produced: list[tuple[str, str]] = []

    def on_message(message: dict[str, Any]) -> None:
        lines.append(readable_message(message))
        for update in tracker.feed(message):
            produced.append((update.address, update.state))
            shipper.add(ResourceReport(address=update.address, state=update.state))  # type: ignore[arg-type]

    async with asyncio.timeout(120):
        code = await engine.apply(tmp_path / "plan.tfplan", on_message)
    assert code == 0 and endpoint.batches == []  # the apply ended while nothing was delivered
    assert sum(re.search(r"\(local-exec\): r\d+-line-\d+$", line) is not None for line in lines) == 40 * 50
    endpoint.release.set()
    await shipper.stop()

    assert [(u["address"], u["state"]) for batch in endpoint.batches for u in batch] == produced
    assert {a: states[-1] for a, states in endpoint.history.items()} == {
        f"terraform_data.r[{i}]": "done" for i in range(40)
    }
