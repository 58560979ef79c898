"""`terraform state rm` and `state push` through a `cloud` block, with the real CLI: each writes
a new version of the stack's managed state under the workspace lock the CLI takes, audited and
listed in GET $O/stacks/$ST/state/versions; a state of another lineage is refused."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Tenant
from support.cli_cloud import WORKSPACE, TlsServer, cli_env, main_tf, served_tls, tf
from support.terraform import requires_terraform

pytestmark = [requires_terraform, pytest.mark.timeout(300)]


@pytest.fixture
def tls_server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[TlsServer]:
    with served_tls(database_url, tmp_path) as served:
        yield served


def test_state_rm_and_push_write_new_versions_and_another_lineage_is_refused(
    tls_server: TlsServer, tenant: Tenant, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "main.tf").write_text(main_tf(tls_server.host, tenant.org))
    env = cli_env(tmp_path, tls_server, tenant.token)
    http = tls_server.http(tenant)
    request.addfinalizer(http.close)
    o = f"{tls_server.server.url}/api/v1/orgs/{tenant.org}"
    tf(["init", "-input=false"], code, env)
    tf(["apply", "-input=false", "-auto-approve"], code, env)
    [applied] = http.get(f"{o}/stacks/{WORKSPACE}/state/versions").json()["versions"]

    tf(["state", "rm", "terraform_data.b"], code, env)
    assert tf(["state", "list"], code, env).stdout.split() == ["terraform_data.a", "terraform_data.c"]
    versions = http.get(f"{o}/stacks/{WORKSPACE}/state/versions").json()["versions"]
    removed = versions[0]
    assert (removed["serial"], removed["lineage"]) == (applied["serial"] + 1, applied["lineage"]), versions
    assert removed["run"] is None and removed["created_by"] == tenant.email, removed
    assert removed["resources"] == applied["resources"] - 1
    # What the CLI pulls is what Firstlume holds.
    pulled = json.loads(tf(["state", "pull"], code, env).stdout)
    stored = http.get(f"{o}/stacks/{WORKSPACE}/state/versions/{removed['serial']}").json()
    assert pulled == stored
    # The workspace lock the CLI took around it is released.
    assert http.get(f"{o}/stacks/{WORKSPACE}/state/lock").status_code in (200, 404)
    audit = http.get(f"{o}/audit", params={"action": "state.write"}).json()
    assert any(e["details"].get("serial") == removed["serial"] for e in audit["entries"]), audit

    # A state of the same lineage with a higher serial is pushed (Terraform counts one more as it
    # writes it).
    pushed = {**pulled, "serial": pulled["serial"] + 5}
    (tmp_path / "next.tfstate").write_text(json.dumps(pushed))
    tf(["state", "push", str(tmp_path / "next.tfstate")], code, env)
    newest = http.get(f"{o}/stacks/{WORKSPACE}/state/versions").json()["versions"][0]
    assert newest["serial"] in (pushed["serial"], pushed["serial"] + 1), newest
    assert newest["lineage"] == pulled["lineage"] and newest["created_by"] == tenant.email

    # Another state's lineage: refused, nothing stored.
    foreign = {**pulled, "lineage": "00000000-0000-0000-0000-000000000000", "serial": 99}
    (tmp_path / "foreign.tfstate").write_text(json.dumps(foreign))
    refused = subprocess.run(
        ["terraform", "state", "push", str(tmp_path / "foreign.tfstate")],
        cwd=code,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0, refused.stdout
    assert "lineage" in refused.stderr, refused.stderr
    after = http.get(f"{o}/stacks/{WORKSPACE}/state/versions").json()["versions"]
    assert after[0] == newest and len(after) == len(versions) + 1
    assert tf(["state", "list"], code, env).stdout.split() == ["terraform_data.a", "terraform_data.c"]
