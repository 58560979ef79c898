"""Real Terraform keeps its state in the served control plane through the `http` backend, with the
token as the Basic password (`-backend-config=password=…`), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import PG_SERVER, LiveServer, Tenant
from support.terraform import requires_terraform, run_terraform, terraform_env, write_config

pytestmark = requires_terraform

SECRET = "s3cr3t-output-9f2c"

MAIN = """
terraform {
  backend "http" {
    username = "anyone"
  }
}
variable "value" {
  type    = string
  default = "one"
}
resource "terraform_data" "app" { input = var.value }
resource "terraform_data" "db" { input = "db" }
output "plain" { value = terraform_data.app.output }
output "secret" {
  value     = "SECRET"
  sensitive = true
}
""".replace("SECRET", SECRET)


class StateApi:
    def __init__(self, server: LiveServer, tenant: Tenant, stack: str) -> None:
        self.base = f"{server.url}/api/v1/orgs/{tenant.org}/stacks/{stack}/state"
        self.http = httpx.Client(headers=tenant.headers, timeout=30)

    def versions(self) -> list[dict[str, Any]]:
        response = self.http.get(f"{self.base}/versions")
        assert response.status_code == 200, response.text
        return response.json()["versions"]  # type: ignore[no-any-return]

    def outputs(self) -> dict[str, dict[str, Any]]:
        response = self.http.get(f"{self.base}/outputs")
        assert response.status_code == 200, response.text
        return {o["name"]: o for o in response.json()["outputs"]}

    def lock(self, lock_id: str, who: str) -> httpx.Response:
        info = {"ID": lock_id, "Operation": "OperationTypeApply", "Who": who, "Version": "1.11.4"}
        return self.http.request("LOCK", f"{self.base}/lock", content=json.dumps(info))


def create_stack(server: LiveServer, tenant: Tenant, slug: str) -> None:
    body = {"slug": slug, "repository": "file:///nowhere"}
    response = httpx.post(
        f"{server.url}/api/v1/orgs/{tenant.org}/stacks", headers=tenant.headers, content=json.dumps(body)
    )
    assert response.status_code == 201, response.text


def init(workdir: Path, env: dict[str, str], address: str, token: str) -> None:
    run_terraform(
        [
            "init",
            "-no-color",
            f"-backend-config=address={address}",
            f"-backend-config=lock_address={address}/lock",
            f"-backend-config=unlock_address={address}/lock",
            f"-backend-config=password={token}",
        ],
        workdir,
        env,
    )


@pytest.fixture
def state(server: LiveServer, tenant: Tenant) -> Iterator[StateApi]:
    create_stack(server, tenant, "net")
    api = StateApi(server, tenant, "net")
    yield api
    api.http.close()


def test_terraform_applies_plans_lists_pulls_and_destroys_against_firstlume(
    state: StateApi, tenant: Tenant, tmp_path: Path
) -> None:
    env = terraform_env(tmp_path)
    workdir = write_config(tmp_path / "code", MAIN)
    init(workdir, env, state.base, tenant.token)
    assert state.http.get(state.base).status_code == 404  # no state yet
    assert state.versions() == []

    run_terraform(["apply", "-auto-approve", "-no-color"], workdir, env)
    first = state.versions()
    assert [v["resources"] for v in first][:1] == [2]
    assert first[0]["created_by"] == tenant.email and first[0]["run"] is None
    assert all(len(v["sha256"]) == 64 for v in first)

    plan = run_terraform(["plan", "-detailed-exitcode", "-no-color"], workdir, env, check=False)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "No changes" in plan.stdout
    listed = run_terraform(["state", "list"], workdir, env).stdout.split()
    assert listed == ["terraform_data.app", "terraform_data.db"]
    pulled = json.loads(run_terraform(["state", "pull"], workdir, env).stdout)
    assert pulled["serial"] == first[0]["serial"] and pulled["lineage"] == first[0]["lineage"]
    assert json.loads(state.http.get(state.base).content)["serial"] == pulled["serial"]

    run_terraform(["apply", "-auto-approve", "-no-color", "-var", "value=two"], workdir, env)
    second = state.versions()
    assert len(second) > len(first)
    serials = [v["serial"] for v in second]
    assert serials == sorted(serials, reverse=True) and len(set(serials)) == len(serials)
    assert {v["lineage"] for v in second} == {pulled["lineage"]}
    outputs = state.outputs()
    assert outputs["plain"] == {"name": "plain", "type": "string", "value": "two", "sensitive": False}
    assert outputs["secret"] == {
        "name": "secret",
        "type": "string",
        "value": "(sensitive)",
        "sensitive": True,
    }
    # An old version is still there, as it was.
    oldest = state.http.get(f"{state.base}/versions/{first[-1]['serial']}")
    assert oldest.status_code == 200 and json.loads(oldest.content)["serial"] == first[-1]["serial"]

    run_terraform(["destroy", "-auto-approve", "-no-color"], workdir, env)
    after = state.versions()
    assert len(after) > len(second) and after[0]["resources"] == 0
    assert run_terraform(["state", "list"], workdir, env).stdout.split() == []


def test_a_lock_held_elsewhere_stops_terraform_until_force_unlocked(
    state: StateApi, tenant: Tenant, tmp_path: Path
) -> None:
    env = terraform_env(tmp_path)
    workdir = write_config(tmp_path / "code", MAIN)
    init(workdir, env, state.base, tenant.token)
    held = state.lock("bobs-lock-7d1e", "bob@laptop")
    assert held.status_code == 200, held.text

    refused = run_terraform(
        ["apply", "-auto-approve", "-no-color", "-lock-timeout=0"], workdir, env, check=False
    )
    assert refused.returncode != 0
    assert "Error acquiring the state lock" in refused.stderr
    # Terraform shows only the held lock's ID: it names the holder.
    # Terraform wraps its error text: compare words.
    assert f"ID=bobs-lock-7d1e, held by {tenant.email} as bob@laptop" in " ".join(refused.stderr.split())
    assert state.versions() == []

    lock = state.http.get(f"{state.base}/lock").json()["lock"]
    assert lock["id"] == "bobs-lock-7d1e" and lock["who"] == "bob@laptop"
    assert lock["holder"] == tenant.email

    run_terraform(["force-unlock", "-force", "bobs-lock-7d1e"], workdir, env)
    assert state.http.get(f"{state.base}/lock").json()["lock"] is None
    run_terraform(["apply", "-auto-approve", "-no-color", "-lock-timeout=0"], workdir, env)
    assert state.versions()[0]["resources"] == 2
    assert state.http.get(f"{state.base}/lock").json()["lock"] is None  # Terraform unlocked after


def database_bytes(database_url: str) -> bytes:
    """Everything the database holds, as bytes: the SQLite files (with the WAL), or a pg_dump."""
    if database_url.startswith("sqlite"):
        path = Path(database_url.split("///", 1)[1])
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    name = database_url.rsplit("/", 1)[1]
    server = PG_SERVER.rsplit("/", 1)[0]
    dump = subprocess.run(["pg_dump", f"{server}/{name}"], capture_output=True, check=True, timeout=120)
    return dump.stdout


def test_state_secrets_are_never_in_the_clear(
    state: StateApi, server: LiveServer, tenant: Tenant, tmp_path: Path, database_url: str
) -> None:
    env = terraform_env(tmp_path)
    workdir = write_config(tmp_path / "code", MAIN)
    init(workdir, env, state.base, tenant.token)
    run_terraform(["apply", "-auto-approve", "-no-color"], workdir, env)
    # Terraform keeps the sensitive output's value in the state, in the clear.
    assert SECRET in run_terraform(["state", "pull"], workdir, env).stdout

    stored = database_bytes(database_url)
    assert b"terraform_data" not in stored  # the state is sealed as a whole
    # pg_dump writes bytea as hex: a plaintext in a binary column would show that way.
    for needle in (SECRET.encode(), SECRET.encode().hex().encode()):
        assert needle not in stored.lower()
    for path in ("/versions", "/outputs", "/lock"):
        assert SECRET not in state.http.get(state.base + path).text
    assert SECRET not in server.log()
