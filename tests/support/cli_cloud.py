"""The real `terraform` CLI against Firstlume served over HTTPS (a local certificate authority
handed to Terraform with SSL_CERT_FILE): the served control plane (fixture `tls_server`), code
with a `cloud` block, and `terraform` runs whose failure shows their output."""

from __future__ import annotations

import os
import random
import socket
import ssl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from conftest import LiveServer, Tenant, free_port, settings_env, stop_live_server
from support.forked import FORKS
from support.terraform import terraform_env
from support.tls import LocalTls, make_local_tls
from support.waiting import wait_until

WORKSPACE = "network"


def main_tf(host: str, org: str) -> str:
    return f"""
terraform {{
  cloud {{
    hostname     = "{host}"
    organization = "{org}"
    workspaces {{ name = "{WORKSPACE}" }}
  }}
}}
resource "terraform_data" "a" {{ input = "a" }}
resource "terraform_data" "b" {{ input = "b" }}
resource "terraform_data" "c" {{ input = terraform_data.a.output }}
output "c" {{ value = terraform_data.c.output }}
"""


@dataclass
class TlsServer:
    server: LiveServer
    tls: LocalTls
    host: str  # "localhost:<port>" (or a loopback address, port 443): the cloud block's hostname

    def http(self, tenant: Tenant) -> httpx.Client:
        return httpx.Client(
            headers=tenant.headers,
            verify=ssl.create_default_context(cafile=str(self.tls.ca_cert)),
            timeout=30,
        )


def _ready(url: str, ca: Path) -> bool:
    try:
        return (
            httpx.get(
                url + "/readyz", timeout=2, verify=ssl.create_default_context(cafile=str(ca))
            ).status_code
            == 200
        )
    except httpx.HTTPError:
        return False


def free_loopback_address() -> str:
    """A loopback address of the test's own (127.0.0.N) whose port 443 is free: a hostname without
    a port, which a TF_TOKEN_<host> variable can spell. Linux routes all of 127/8 to lo; the tries
    start at a random N so that parallel xdist workers (and sessions) rarely meet."""
    if os.geteuid() != 0:
        pytest.fail(
            "this test serves the control plane on port 443 (TF_TOKEN_<host> cannot name a port) and so "
            f"must run as root, as CI does; it runs as uid {os.geteuid()}"
        )
    start = random.randrange(2, 255)
    for n in [*range(start, 255), *range(2, start)]:
        address = f"127.0.0.{n}"
        with socket.socket() as sock:
            try:
                sock.bind((address, 443))
            except OSError:
                continue
            return address
    pytest.fail("no loopback address 127.0.0.2-254 has port 443 free")


@contextmanager
def served_tls(database_url: str, tmp_path: Path, address: str | None = None) -> Iterator[TlsServer]:
    """The control plane served over HTTPS with a certificate of a new local authority (test modules
    make it their fixture `tls_server`, after `tenant`): on localhost and a free port, or on port
    443 of `address` (see free_loopback_address)."""
    tls = make_local_tls(tmp_path / "tls", (address,) if address else ("localhost",))
    bind, port = (address, 443) if address else ("127.0.0.1", free_port())
    host = address if address else f"localhost:{port}"
    url = f"https://{host}"
    env = {
        **os.environ,
        **settings_env(database_url, tmp_path / "data"),
        "FIRSTLUME_PUBLIC_URL": url,
        "FIRSTLUME_TLS_CERT": str(tls.cert),
        "FIRSTLUME_TLS_KEY": str(tls.key),
        # The executors' Terraform and HTTP client reach the control plane over HTTPS too.
        "SSL_CERT_FILE": str(tls.ca_cert),
    }
    log_path = tmp_path / "server.log"
    log_path.unlink(missing_ok=True)
    serve = ["serve", "--host", bind, "--port", str(port), "--log-level", "warning"]
    process = FORKS.spawn(serve, env, log_path)
    server = LiveServer(url=url, process=process, log_path=log_path, env=env)
    try:
        wait_until(
            lambda: _ready(url, tls.ca_cert) or process.poll() is not None, 60, "the HTTPS control plane"
        )
        assert process.poll() is None, server.log()
        yield TlsServer(server=server, tls=tls, host=host)
    finally:
        stop_live_server(server)


def cli_env(tmp_path: Path, served: TlsServer, token: str) -> dict[str, str]:
    # A hostname with a port cannot be a TF_TOKEN_ variable's name: the CLI config's credentials
    # block gives the token for it, as `terraform login` would have stored it.
    credentials = f'credentials "{served.host}" {{\n  token = "{token}"\n}}\n'
    return terraform_env(tmp_path, credentials, SSL_CERT_FILE=str(served.tls.ca_cert))


def token_env(tmp_path: Path, served: TlsServer, token: str) -> dict[str, str]:
    """The token in TF_TOKEN_<host> alone: the test's CLI config has no credentials block, and HOME
    is an empty directory of the test's own (no credentials.tfrc.json of `terraform login`)."""
    assert ":" not in served.host, f"{served.host}: a TF_TOKEN_ variable cannot name a port"
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # Terraform's spelling of a hostname as a variable name: "." is "_", "-" is "__".
    variable = "TF_TOKEN_" + served.host.replace("-", "__").replace(".", "_")
    return terraform_env(tmp_path, SSL_CERT_FILE=str(served.tls.ca_cert), HOME=str(home), **{variable: token})


def tf(
    args: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(
            ["terraform", *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=240
        )
    except subprocess.TimeoutExpired as expired:
        raise AssertionError(
            f"terraform {' '.join(args)} did not finish:\n{expired.stdout!r}"[-3000:]
        ) from None
    assert result.returncode == 0, f"terraform {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result
