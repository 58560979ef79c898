"""Terraform code runs arbitrary programs: a run's `local-exec` looks for everything of the
control plane and of other runs it could read, and finds nothing (issue 16.1).

With bubblewrap: no database URL, key, data dir content, database file, control-plane process
or other run's work dir. Without it (no bwrap, or user namespaces refused): the environment is
clean and the work dir is outside the data dir, and gone after the run; the README says what is
then still visible (the user's files and processes)."""

from __future__ import annotations

import fcntl
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import TEST_KEY, LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from firstlume.launchers import sandbox
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform
from support.waiting import wait_until

pytestmark = requires_terraform

PROBE = r"""#!/bin/sh
# What a hostile run would try: its environment, every /proc/*/environ it can read, the data dir,
# the database file, the other executors' work dirs.
echo "=== ENV"
env
if [ "$4" = bubblewrap ]; then  # without a sandbox this is the whole machine's: not for a log
  echo "=== PROC"
  for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null; done
  echo "=== CMDLINES"
  for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f" 2>/dev/null; echo; done
fi
echo "=== DATA"
ls -la "$1" 2>&1
cat "$1"/* 2>&1
head -c 16 "$2" 2>&1; echo
echo "=== WORK"
ls -la "$3" 2>&1
cat "$3"/*/secret.txt 2>&1
echo "=== PWD"
pwd
echo "=== END"
"""


def probe_tf(data_dir: Path, database_file: Path, work_root: Path, mode: str) -> str:
    return f"""
resource "terraform_data" "probe" {{
  input = "probe"
  provisioner "local-exec" {{
    command = "sh ${{path.module}}/probe.sh {data_dir} {database_file} {work_root} {mode}"
  }}
}}
"""


@pytest.fixture(params=["bubblewrap", "off"])
def sandbox_mode(request: pytest.FixtureRequest) -> str:
    if request.param == "bubblewrap":
        why_not = sandbox.works()
        if why_not is not None and Path(sandbox.BWRAP).exists():
            pytest.skip(f"bubblewrap cannot make a sandbox on this machine: {why_not}")
        assert why_not is None, "scripts/ensure-test-services.sh installs bubblewrap: " + why_not
    return str(request.param)


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant, sandbox_mode: str) -> Iterator[LiveServer]:
    data = tmp_path / "data"
    data.mkdir()
    # A file of the control plane's, as the generated key would be: nobody else may read it.
    (data / "canary.key").write_text(CANARY)
    served = start_live_server(
        settings_env(
            database_url,
            data,
            FIRSTLUME_EXECUTOR_SANDBOX=sandbox_mode,
            FIRSTLUME_EXECUTOR_WORK_DIR=str(tmp_path / "work"),
        ),
        tmp_path / "server.log",
    )
    yield served
    stop_live_server(served)


CANARY = f"canary-{uuid.uuid4().hex}"
OTHER_SECRET = f"other-run-{uuid.uuid4().hex}"


def _finished_log(api: Api, run_id: str) -> str | None:
    text = api.log(run_id)
    return text if "=== END" in text else None


def _section(log: str, name: str) -> str:
    match = re.search(rf"=== {name}\n(.*?)(?:\n[^\n]*=== |\Z)", log, re.S)
    assert match, f"no {name} section in the log:\n{log}"
    return match.group(1)


def test_a_run_finds_nothing_of_the_control_plane_or_other_runs(
    api: Api, server: LiveServer, tmp_path: Path, database_url: str, sandbox_mode: str
) -> None:
    api.settings("", {"require_approval": False})
    data_dir, work_root = tmp_path / "data", tmp_path / "work"
    database_file = (
        Path(database_url.split(":///", 1)[1]) if database_url.startswith("sqlite") else data_dir / "x.db"
    )
    # Another run's work dir, in use (its lock held), with a secret in it.
    other = work_root / "other-run"
    other.mkdir(parents=True)
    (other / "secret.txt").write_text(OTHER_SECRET)
    lock = os.open(str(other) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_SH)
    try:
        repo = make_stack_repo(tmp_path, probe_tf(data_dir, database_file, work_root, sandbox_mode))
        repo.commit({"probe.sh": PROBE}, "probe")
        api.create_stack("app", repo)
        run_id = api.start("app", "apply")
        api.wait(run_id, "applied")
        log = wait_until(lambda: _finished_log(api, run_id), 30, "the probe's whole log")
    finally:
        os.close(lock)

    env, pwd = _section(log, "ENV"), _section(log, "PWD").strip().split()[-1]
    everything = log[log.index("=== ENV") :]  # what the probe found, not its own command line
    control_plane_secrets = [TEST_KEY, database_url.split("://", 1)[1]]
    if database_url.startswith("postgresql"):
        control_plane_secrets.append(database_url.rsplit("/", 1)[-1])  # the database's own name
    # Always: the run's environment holds nothing of the control plane's, and it works outside
    # the data dir.
    for secret in control_plane_secrets:
        assert secret not in env
    assert "FIRSTLUME_" not in env
    assert Path(pwd).is_relative_to(work_root) and not Path(pwd).is_relative_to(data_dir)
    # ... and its work dir is gone once it ended (the spare's own remains, empty of any run).
    work_dir = work_root / Path(pwd).relative_to(work_root).parts[0]
    wait_until(lambda: not work_dir.exists(), 10, "the run's work dir to be removed")

    if sandbox_mode == "off":
        return
    # In the sandbox: no process of the control plane, no data dir content, no database file,
    # no other run's dir.
    for secret in [
        *control_plane_secrets,
        CANARY,
        OTHER_SECRET,
        "SQLite format 3",
        "canary.key",
        "other-run",
    ]:
        assert secret not in everything, f"{secret!r} leaked into the run's log"
    cmdlines = _section(log, "CMDLINES")
    assert "firstlume serve" not in cmdlines and "uvicorn" not in cmdlines
    assert "probe.sh" in cmdlines  # positive control: it did list the processes it can see
