"""`terraform login <host>` with the real CLI and a real browser: the CLI prints the address of
Firstlume's authorization page (it cannot open a browser here), Chromium signs in there and
allows it, the CLI stores the token it gets, and the `cloud` block's whole workflow (init, plan,
apply, output, state list, a plan with no changes, destroy) then works with that token alone (no
TF_TOKEN_ variable, no credentials block)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from conftest import Tenant
from support.browser import DESKTOP, PHONE, browsing
from support.cli_cloud import TlsServer, main_tf, served_tls, tf
from support.terraform import requires_terraform, terraform_env
from support.waiting import wait_until

pytestmark = [
    requires_terraform,
    pytest.mark.timeout(300),
    # The browser drives the UI; the OAuth exchange beneath it runs on both databases in
    # tests/test_cli_login.py.
    pytest.mark.parametrize("database_url", ["sqlite"], indirect=True),
]


@pytest.fixture
def tls_server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[TlsServer]:
    with served_tls(database_url, tmp_path) as served:
        yield served


# Terraform prints the address alone on its line.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LOGIN_URL = re.compile(r"^\s*(https://\S+/cli-login\?\S+)\s*$", re.MULTILINE)


class Output:
    """A process's output as it comes (read by a thread): the test waits on what it says."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.text = ""
        assert process.stdout is not None
        stream = process.stdout
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: object) -> None:
        for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
            self.text += ANSI.sub("", line)


def test_terraform_login_through_the_browser_then_init_and_plan_with_its_token(
    tls_server: TlsServer, tenant: Tenant, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    # Terraform writes its credentials file there but does not make the directory (a laptop's
    # has it from Terraform's earlier runs).
    (home / ".terraform.d").mkdir(parents=True)
    # Terraform stores the token in $HOME/.terraform.d/credentials.tfrc.json and reads it back
    # only when no TF_CLI_CONFIG_FILE overrides the CLI configuration's location (Terraform then
    # skips its configuration directory): this CLI's own configuration is $HOME/.terraformrc,
    # with no credentials block, and no TF_TOKEN_ variable is set. BROWSER=false: xdg-open,
    # where installed, fails at once, so Terraform prints the address.
    env = terraform_env(
        tmp_path, SSL_CERT_FILE=str(tls_server.tls.ca_cert), HOME=str(home), TF_INPUT="1", BROWSER="false"
    )
    (home / ".terraformrc").write_text(Path(env.pop("TF_CLI_CONFIG_FILE")).read_text())
    env.pop("TF_IN_AUTOMATION")
    assert not [k for k in env if k.startswith("TF_TOKEN_")]
    login = subprocess.Popen(
        ["terraform", "login", tls_server.host],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = Output(login)
    try:
        assert login.stdin is not None
        login.stdin.write("yes\n")
        login.stdin.flush()

        def printed_url() -> str | None:
            assert login.poll() is None, output.text
            found = LOGIN_URL.search(output.text)
            return found.group(1) if found else None

        url = wait_until(printed_url, 60, "terraform login to print the login page's address")
        assert url.startswith(f"https://{tls_server.host}/cli-login?"), url
        assert "code_challenge_method=S256" in url and "client_id=terraform-cli" in url, url

        with browsing(tls_server.server) as ui:
            page = ui.open()
            # Not signed in yet: Firstlume's sign-in, then the page the CLI asked for.
            page.goto(url.removeprefix(tls_server.server.url))
            page.get_by_label("API token").fill(tenant.token)
            page.get_by_role("button", name="Sign in").click()
            ask = page.get_by_test_id("cli-login-ask")
            expect(ask).to_have_text(f"terraform login wants a token for {tenant.email} in {tenant.org}.")
            ui.check_screen(page, "cli-login-desktop")
            page.set_viewport_size(PHONE)
            ui.check_screen(page, "cli-login-phone")
            page.set_viewport_size(DESKTOP)
            page.get_by_role("button", name="Allow").click()
            # Terraform's own page on localhost, where the browser brought the code.
            expect(page).to_have_url(re.compile(r"^http://localhost:100(0\d|10)/login\?"))
            login.wait(timeout=60)
            output.thread.join(timeout=10)
            assert login.returncode == 0, output.text
            output.thread.join(timeout=10)
            assert "Success! Terraform has obtained and saved an API token." in output.text, output.text

            # The token is the person's, named "terraform login", on their Tokens page.
            page.goto(f"/orgs/{tenant.org}/tokens")
            expect(page.get_by_role("cell", name="terraform login", exact=True)).to_be_visible()
    finally:
        if login.poll() is None:
            login.kill()
            login.wait()
        for stream in (login.stdin, login.stdout):
            if stream is not None:
                stream.close()

    stored = json.loads((home / ".terraform.d" / "credentials.tfrc.json").read_text())
    token = stored["credentials"][tls_server.host]["token"]
    assert token.startswith("fl_") and token != tenant.token

    code = tmp_path / "code"
    code.mkdir()
    (code / "main.tf").write_text(main_tf(tls_server.host, tenant.org))
    tf(["init", "-input=false"], code, env)
    planned = tf(["plan", "-input=false"], code, env)
    assert "Plan: 3 to add, 0 to change, 0 to destroy." in planned.stdout, planned.stdout
    applied = tf(["apply"], code, env, stdin="yes\n")
    assert "Apply complete! Resources: 3 added, 0 changed, 0 destroyed." in applied.stdout, applied.stdout
    assert tf(["output", "-raw", "c"], code, env).stdout == "a"
    assert tf(["state", "list"], code, env).stdout.split() == [
        "terraform_data.a",
        "terraform_data.b",
        "terraform_data.c",
    ]
    assert "No changes." in tf(["plan", "-input=false"], code, env).stdout
    destroyed = tf(["destroy"], code, env, stdin="yes\n")
    assert "3 destroyed" in destroyed.stdout, destroyed.stdout
