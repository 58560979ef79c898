"""The control plane is SIGKILLed mid-apply and stays down longer than the heartbeat timeout:
at restart the running apply is not failed (the control plane's own downtime is not the
executor's silence), the executor keeps retrying through the outage, and the apply ends
`applied`; the next run on the stack is not blocked by a state lock."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import httpx

from conftest import Tenant, free_port, settings_env, start_live_server, stop_live_server
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform
from support.waiting import wait_until

pytestmark = requires_terraform

# The executors beat every second (conftest's settings_env): a timeout of a few beats would be
# missed by a stall of the loaded test machine alone, so it is eight beats, and the outage longer.
TIMEOUT = 8
OUTAGE = 12
SLOW = """
resource "terraform_data" "slow" {
  input = "s"
  provisioner "local-exec" {
    command = "sleep 22"
  }
}
"""


def scheduler_claims(url: str) -> int:
    """How many claims the served scheduler has made, from its /metrics."""
    text = httpx.get(url + "/metrics", timeout=5).text
    found = re.search(r"^firstlume_scheduler_claim_latency_seconds_count (\S+)$", text, re.MULTILINE)
    return int(float(found.group(1))) if found else 0


def test_an_outage_longer_than_the_heartbeat_timeout_does_not_fail_a_running_apply(
    database_url: str, tmp_path: Path, tenant: Tenant
) -> None:
    env = settings_env(database_url, tmp_path / "data", FIRSTLUME_HEARTBEAT_TIMEOUT=str(TIMEOUT))
    port = free_port()
    log_path = tmp_path / "server.log"
    server = start_live_server(env, log_path, port=port)
    api = Api(server.url, tenant.org, tenant.token)
    try:
        api.settings("", {"require_approval": False})
        api.create_stack("app", make_stack_repo(tmp_path, SLOW))
        run_id = api.start("app", "apply")
        api.wait(run_id, "applying", timeout=90)
        wait_until(
            lambda: api.by_address(run_id)["terraform_data.slow"]["state"] == "applying",
            60,
            "the slow resource to start",
        )
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
        down_at = time.monotonic()
        time.sleep(OUTAGE)  # the outage itself: nothing to wait for but time
        server = start_live_server(env, log_path, port=port)
        assert time.monotonic() - down_at > TIMEOUT
        # Past the restarted scheduler's first health passes, the apply is still running… (each
        # pass claims plans and applies, then checks heartbeats: five claims span two passes).
        wait_until(lambda: scheduler_claims(server.url) >= 5, 30, "two passes of the restarted scheduler")
        assert api.run(run_id)["status"] in ("applying", "applied"), api.run(run_id)
        run = api.wait(run_id, "applied", timeout=90)
        assert run["error"] is None
        assert api.by_address(run_id)["terraform_data.slow"]["state"] == "done"
        # …and the stack is free: a plan finds the state unlocked and in step.
        plan = api.start("app", "plan")
        assert api.wait(plan, "no_changes", timeout=90)["error"] is None
    finally:
        api.close()
        stop_live_server(server)
