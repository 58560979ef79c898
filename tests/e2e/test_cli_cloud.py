"""The real `terraform` CLI as a client of Firstlume over HTTPS (a `cloud` block): init, a remote
plan whose log streams, apply answered "yes", output, state list, a second plan with no changes,
and destroy, the token given as TF_TOKEN_<host> alone; the runs and state versions are Firstlume's
own. A CLI apply's log live in a GraphQL subscription while the CLI prints it."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import Tenant
from support.cli_cloud import (
    WORKSPACE,
    TlsServer,
    cli_env,
    free_loopback_address,
    main_tf,
    served_tls,
    tf,
    token_env,
)
from support.graphql_ws import GraphQLWebSocket, ws_url
from support.make_run import make_run
from support.terraform import requires_terraform, terraform_env
from support.waiting import until, wait_until

pytestmark = [requires_terraform, pytest.mark.timeout(300)]


@pytest.fixture
def tls_server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[TlsServer]:
    with served_tls(database_url, tmp_path) as served:
        yield served


def test_tf_token_alone_init_plan_apply_output_state_destroy(
    database_url: str, tenant: Tenant, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Port 443 of a loopback address of this test's own: a host a variable's name can spell.
    with served_tls(database_url, tmp_path, free_loopback_address()) as served:
        code = tmp_path / "code"
        code.mkdir()
        (code / "main.tf").write_text(main_tf(served.host, tenant.org))
        env = token_env(tmp_path, served, tenant.token)
        variable = "TF_TOKEN_" + served.host.replace(".", "_")
        assert env[variable] == tenant.token
        assert "credentials" not in Path(env["TF_CLI_CONFIG_FILE"]).read_text()

        # Without the variable the CLI has no token for the host: it is what authenticates below.
        refused = subprocess.run(
            ["terraform", "init", "-input=false"],
            cwd=code,
            env={k: v for k, v in env.items() if k != variable},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert refused.returncode != 0, refused.stdout
        assert "token" in refused.stderr.lower(), refused.stderr

        tf(["init", "-input=false"], code, env)
        planned = tf(["plan", "-input=false"], code, env)
        assert "Running plan in" in planned.stdout, planned.stdout
        assert "Plan: 3 to add, 0 to change, 0 to destroy." in planned.stdout, planned.stdout

        http = served.http(tenant)
        request.addfinalizer(http.close)
        o = f"{served.server.url}/api/v1/orgs/{tenant.org}"
        runs = http.get(f"{o}/stacks/{WORKSPACE}/runs").json()["runs"]
        assert [(r["type"], r["status"], r["trigger"]["kind"]) for r in runs] == [("plan", "planned", "cli")]
        assert runs[0]["trigger"]["configuration_version"].startswith("cv-")

        applied = tf(["apply"], code, {**env, "TF_INPUT": "1"}, stdin="yes\n")
        assert "Apply complete! Resources: 3 added, 0 changed, 0 destroyed." in applied.stdout, applied.stdout
        runs = http.get(f"{o}/stacks/{WORKSPACE}/runs").json()["runs"]
        assert [(r["type"], r["status"], r["trigger"]["kind"]) for r in runs] == [
            ("apply", "applied", "cli"),
            ("plan", "planned", "cli"),
        ]
        apply_run = runs[0]
        # Per-resource states, as for any run.
        changes = http.get(f"{o}/runs/{apply_run['id']}/changes").text
        for address in ("terraform_data.a", "terraform_data.b", "terraform_data.c"):
            assert address in changes
        assert '"state":"done"' in changes.replace(" ", ""), changes

        output = tf(["output", "-raw", "c"], code, env)
        assert output.stdout == "a"
        listed = tf(["state", "list"], code, env)
        assert listed.stdout.split() == ["terraform_data.a", "terraform_data.b", "terraform_data.c"]

        again = tf(["plan", "-input=false"], code, env)
        assert "No changes." in again.stdout, again.stdout

        versions = http.get(f"{o}/stacks/{WORKSPACE}/state/versions").json()["versions"]
        assert versions and versions[0]["run"]["id"] == apply_run["id"], versions

        destroyed = tf(["destroy"], code, {**env, "TF_INPUT": "1"}, stdin="yes\n")
        # The remote apply's own summary, streamed from the executor's Terraform.
        assert "Resources: 0 added, 0 changed, 3 destroyed." in destroyed.stdout, destroyed.stdout
        listed = tf(["state", "list"], code, env)
        assert listed.stdout.split() == []

        # A lock left behind (here taken over the API) is released by `terraform force-unlock`.
        v2 = f"{served.server.url}/api/v2"
        workspace = http.get(f"{v2}/organizations/{tenant.org}/workspaces/{WORKSPACE}")
        locked = http.post(f"{v2}/workspaces/{workspace.json()['data']['id']}/actions/lock")
        assert locked.json()["data"]["attributes"]["locked"] is True, locked.text
        tf(["force-unlock", "-force", f"{tenant.org}/{WORKSPACE}"], code, env)
        workspace = http.get(f"{v2}/organizations/{tenant.org}/workspaces/{WORKSPACE}")
        assert workspace.json()["data"]["attributes"]["locked"] is False


def _latest_run(http: httpx.Client, o: str) -> dict[str, Any] | None:
    runs = http.get(f"{o}/stacks/{WORKSPACE}/runs").json()["runs"]
    return runs[0] if runs else None


def _wait_for_approval(http: httpx.Client, o: str, cli: subprocess.Popen[str], before: str) -> dict[str, Any]:
    def awaiting() -> dict[str, Any] | None:
        assert cli.poll() is None, cli.communicate()
        run = _latest_run(http, o)
        return run if run and run["id"] != before and run["status"] == "awaiting_approval" else None

    return wait_until(awaiting, 120, "the CLI's run to wait for its approval")


def test_confirm_destructive_is_approved_in_firstlume_while_the_cli_waits(
    tls_server: TlsServer, tenant: Tenant, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    main = main_tf(tls_server.host, tenant.org)
    (code / "main.tf").write_text(main)
    env = cli_env(tmp_path, tls_server, tenant.token)
    tf(["init", "-input=false"], code, env)
    http = tls_server.http(tenant)
    request.addfinalizer(http.close)
    o = f"{tls_server.server.url}/api/v1/orgs/{tenant.org}"
    tf(["apply", "-input=false", "-auto-approve"], code, env)
    response = http.patch(
        f"{o}/stacks/{WORKSPACE}/settings", content=json.dumps({"confirm_destructive": True})
    )
    assert response.status_code == 200, response.text

    cloud = main.split("resource ")[0]
    without_b = (
        cloud
        + 'resource "terraform_data" "a" { input = "a" }\n'
        + main[main.index('resource "terraform_data" "c"') :]
    )
    only_a = cloud + 'resource "terraform_data" "a" { input = "a" }\n'
    for flags, removed, config in (
        ([], "terraform_data.b", without_b),
        (["-auto-approve"], "terraform_data.c", only_a),
    ):
        (code / "main.tf").write_text(config)
        before = _latest_run(http, o)
        assert before is not None
        cli = subprocess.Popen(
            ["terraform", "apply", *flags],
            cwd=code,
            env={**env, "TF_INPUT": "1"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert cli.stdin is not None
            cli.stdin.write("yes\n")
            cli.stdin.flush()
            run = _wait_for_approval(http, o, cli, before["id"])
            # The CLI's "yes" (or -auto-approve) is not the approval the stack asks for.
            refused = http.post(f"{tls_server.server.url}/api/v2/runs/run-{run['id']}/actions/apply")
            assert refused.status_code == 409, refused.text
            assert _latest_run(http, o)["status"] == "awaiting_approval"  # type: ignore[index]
            assert cli.poll() is None
            approved = http.post(
                f"{o}/runs/{run['id']}/approve", content=json.dumps({"acknowledged": [removed]})
            )
            assert approved.status_code == 200, approved.text
            output, _ = cli.communicate(timeout=180)
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait()
        assert cli.returncode == 0, output
        assert "This run must be approved in Firstlume" in output, output
        assert f"/orgs/{tenant.org}/runs/{run['id']}" in output, output
        assert "1 destroyed" in output, output
        assert _latest_run(http, o)["status"] == "applied"  # type: ignore[index]


def test_workspaces_by_tags_and_a_cli_plan_queued_behind_an_apply(
    tls_server: TlsServer, tenant: Tenant, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tagged = main_tf(tls_server.host, tenant.org).replace(f'name = "{WORKSPACE}"', 'tags = ["team:net"]')
    code = tmp_path / "code"
    code.mkdir()
    (code / "main.tf").write_text(tagged)
    env = cli_env(tmp_path, tls_server, tenant.token)
    http = tls_server.http(tenant)
    request.addfinalizer(http.close)
    o = f"{tls_server.server.url}/api/v1/orgs/{tenant.org}"
    # A stack without the tag is not one of this code's workspaces.
    untagged = http.post(
        f"{tls_server.server.url}/api/v2/organizations/{tenant.org}/workspaces",
        content=json.dumps({"data": {"type": "workspaces", "attributes": {"name": "other"}}}),
    )
    assert untagged.status_code == 201, untagged.text

    first = http.post(
        f"{tls_server.server.url}/api/v2/organizations/{tenant.org}/workspaces",
        content=json.dumps(
            {"data": {"type": "workspaces", "attributes": {"name": "net-a", "tag-names": ["team:net"]}}}
        ),
    )
    assert first.status_code == 201, first.text
    tf(["init", "-input=false"], code, {**env, "TF_WORKSPACE": "net-a"})
    tf(["workspace", "new", "net-b"], code, env)
    listed = tf(["workspace", "list"], code, env).stdout
    assert "net-a" in listed and "net-b" in listed and "other" not in listed, listed
    tf(["workspace", "select", "net-a"], code, env)
    assert tf(["workspace", "show"], code, env).stdout.strip() == "net-a"
    stacks = {s["slug"] for s in http.get(f"{o}/stacks").json()["stacks"]}
    assert {"net-a", "net-b", "other"} <= stacks

    # An apply waits for its "yes", holding the stack's lock; a second CLI's plan queues behind it.
    apply_cli = subprocess.Popen(
        ["terraform", "apply"],
        cwd=code,
        env={**env, "TF_INPUT": "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    plan_cli: subprocess.Popen[str] | None = None
    try:
        apply_run = _wait_for_approval_of(http, o, "net-a", apply_cli)
        plan_cli = subprocess.Popen(
            ["terraform", "plan", "-input=false"],
            cwd=code,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

        def queued() -> dict[str, Any] | None:
            assert plan_cli is not None and plan_cli.poll() is None
            runs = http.get(f"{o}/stacks/net-a/runs").json()["runs"]
            return runs[0] if runs[0]["id"] != apply_run["id"] and runs[0]["status"] == "queued" else None

        plan_run = wait_until(queued, 60, "the second CLI's plan to queue")
        assert plan_run["queue_position"] == 1, plan_run
        assert http.get(f"{o}/runs/{apply_run['id']}").json()["status"] == "awaiting_approval"
        assert apply_cli.stdin is not None
        apply_cli.stdin.write("yes\n")
        apply_cli.stdin.flush()
        applied, _ = apply_cli.communicate(timeout=180)
        assert apply_cli.returncode == 0, applied
        planned, _ = plan_cli.communicate(timeout=180)
        assert plan_cli.returncode == 0, planned
        assert "No changes." in planned, planned
        history = http.get(f"{o}/stacks/net-a/runs").json()["runs"]
        assert [(r["type"], r["status"]) for r in history[:2]] == [
            ("plan", "no_changes"),
            ("apply", "applied"),
        ]
    finally:
        for cli in (apply_cli, plan_cli):
            if cli is not None and cli.poll() is None:
                cli.kill()
                cli.wait()


def _wait_for_approval_of(
    http: httpx.Client, o: str, stack: str, cli: subprocess.Popen[str]
) -> dict[str, Any]:
    def awaiting() -> dict[str, Any] | None:
        assert cli.poll() is None, cli.communicate()
        runs = http.get(f"{o}/stacks/{stack}/runs").json()["runs"]
        return runs[0] if runs and runs[0]["status"] == "awaiting_approval" else None

    return wait_until(awaiting, 120, "the CLI's apply to wait for its yes")


def test_make_run_tls_prints_the_ssl_cert_file_export_the_cli_needs(tmp_path: Path) -> None:
    with make_run(tmp_path / "data", scheduler=True, tls=True) as (exports, _):
        assert {"SSL_CERT_FILE", "FIRSTLUME_HOST", "FIRSTLUME_TOKEN"} <= set(exports), exports
        host = exports["FIRSTLUME_HOST"]
        org = exports["O"].rstrip("/").rsplit("/", 1)[1]
        assert exports["O"].startswith(f"https://{host}/")
        code = tmp_path / "code"
        code.mkdir()
        (code / "main.tf").write_text(main_tf(host, org))
        credentials = f'credentials "{host}" {{\n  token = "{exports["FIRSTLUME_TOKEN"]}"\n}}\n'
        env = terraform_env(tmp_path, credentials, SSL_CERT_FILE=exports["SSL_CERT_FILE"])
        tf(["init", "-input=false"], code, env)
        planned = tf(["plan", "-input=false"], code, env)
        assert "Plan: 3 to add, 0 to change, 0 to destroy." in planned.stdout, planned.stdout


RUN_LOG = """subscription($org: String!, $id: ID!) {
  runLog(org: $org, runId: $id, fromOffset: 0) { text nextOffset } }"""


def _slow_tf(host: str, org: str, gate: Path) -> str:
    # The resource prints a line, then holds its apply until the test opens the gate (a file
    # outside the data dir, so a sandboxed executor sees it too), at most two minutes.
    cloud = main_tf(host, org).split("resource ")[0]
    return (
        cloud
        + f"""
resource "terraform_data" "slow" {{
  input = "s"
  provisioner "local-exec" {{
    command = "echo slow resource holding; i=0; while [ ! -e {gate} ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; echo slow resource released"
  }}
}}
"""
    )


def test_a_cli_applys_log_is_live_in_graphql_while_the_cli_streams_it(
    tls_server: TlsServer, tenant: Tenant, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    gate = tmp_path / "gate"
    code = tmp_path / "code"
    code.mkdir()
    (code / "main.tf").write_text(_slow_tf(tls_server.host, tenant.org, gate))
    env = cli_env(tmp_path, tls_server, tenant.token)
    tf(["init", "-input=false"], code, env)
    http = tls_server.http(tenant)
    request.addfinalizer(http.close)
    o = f"{tls_server.server.url}/api/v1/orgs/{tenant.org}"

    cli = subprocess.Popen(
        ["terraform", "apply", "-input=false", "-auto-approve", "-no-color"],
        cwd=code,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    printed: list[str] = []  # the CLI's lines as it prints them
    assert cli.stdout is not None
    stdout = cli.stdout
    reader = threading.Thread(target=lambda: printed.extend(iter(stdout.readline, "")), daemon=True)
    reader.start()
    try:

        def applying() -> dict[str, Any] | None:
            assert cli.poll() is None, "".join(printed)
            run = _latest_run(http, o)
            return run if run and run["status"] == "applying" else None

        run = wait_until(applying, 120, "the CLI's run to apply")
        received: list[str] = []  # the run's log as the GraphQL subscription delivers it

        def has(text: str) -> bool:  # the resource's own line, not the echo of its command
            return f"(local-exec): {text}" in "".join(received)

        async def follow() -> None:
            context = ssl.create_default_context(cafile=str(tls_server.tls.ca_cert))
            url = ws_url(tls_server.server.url)
            async with GraphQLWebSocket.connect(url, tenant.token, ssl=context) as ws:
                log = await ws.subscribe(RUN_LOG, {"org": tenant.org, "id": run["id"]})
                while not has("slow resource holding"):
                    received.append((await log.next(within=120))["runLog"]["text"])
                # The resource holds on the gate: the run is live in GraphQL and on the CLI at once.
                await until(
                    lambda: "".join(printed).count("(local-exec): slow resource holding"),
                    60,
                    "the CLI to print it",
                )
                assert cli.poll() is None and not gate.exists()
                assert http.get(f"{o}/runs/{run['id']}").json()["status"] == "applying"
                gate.touch()
                while not has("slow resource released"):
                    received.append((await log.next(within=120))["runLog"]["text"])

        asyncio.run(follow())
        cli.wait(timeout=180)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        reader.join(30)
        stdout.close()
    streamed = "".join(printed)
    assert cli.returncode == 0, streamed
    assert "Apply complete! Resources: 1 added, 0 changed, 0 destroyed." in streamed, streamed
    # The same lines: the resource's own output, in the subscription and in the CLI's output.
    lines = [line for line in "".join(received).splitlines() if "(local-exec): slow resource" in line]
    assert len(lines) == 2, received
    for line in lines:
        assert line.strip() in streamed, (line, streamed)
