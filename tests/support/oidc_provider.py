"""A real OpenID Connect provider for the tests: `oidc-provider-mock` (discovery, JWKS, the
authorization and token endpoints, users whose claims a test chooses with PUT /users/<sub>),
served on a local port in a process of its own.

Beside the provider's own endpoints, two that only tests use, to play an attacker between the
provider and Firstlume or to rotate the provider's key:
- POST /test/tamper {"mode": ...}: the next token response's ID token is altered: "expired" (an
  exp in the past), "wrong_audience", "wrong_nonce" (each signed with the provider's own key),
  "other_key" (the same claims signed by another key under the same key id), "forged" (claims
  changed after signing: another email).
- POST /test/rotate: the provider signs with a new key (a new key id) and publishes only it.

Run: python tests/support/oidc_provider.py <port>
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

TAMPER_MODES = ("expired", "wrong_audience", "wrong_nonce", "other_key", "forged")


@dataclass
class Provider:
    url: str
    process: subprocess.Popen[bytes]

    def set_user(self, sub: str, claims: dict[str, Any]) -> None:
        answer = httpx.put(f"{self.url}/users/{sub}", json=claims, timeout=10)
        assert answer.status_code == 204, answer.text

    def tamper(self, mode: str) -> None:
        answer = httpx.post(f"{self.url}/test/tamper", json={"mode": mode}, timeout=10)
        assert answer.status_code == 204, answer.text

    def rotate(self) -> None:
        answer = httpx.post(f"{self.url}/test/rotate", timeout=10)
        assert answer.status_code == 204, answer.text

    def kid(self) -> str:
        return str(httpx.get(f"{self.url}/jwks", timeout=10).json()["keys"][0]["kid"])


@contextlib.contextmanager
def running_provider(port: int, log_path: Path) -> Iterator[Provider]:
    env = {**os.environ, "AUTHLIB_INSECURE_TRANSPORT": "1", "PYTHONWARNINGS": "ignore"}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-P", __file__, str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    provider = Provider(url=f"http://127.0.0.1:{port}", process=process)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if (
                    httpx.get(f"{provider.url}/.well-known/openid-configuration", timeout=2).status_code
                    == 200
                ):
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the OIDC provider did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.1)
        yield provider
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _serve(port: int) -> None:  # pragma: no cover - runs in the provider's own process
    import flask
    import oidc_provider_mock
    import werkzeug.serving
    from authlib.jose import RSAKey as AuthlibRSAKey
    from joserfc import jwt
    from joserfc.jwk import RSAKey

    app = oidc_provider_mock.app()
    tamper: dict[str, str | None] = {"mode": None}

    def storage() -> Any:
        return flask.g.oidc_provider_mock_storage

    @app.post("/test/tamper")
    def set_tamper() -> tuple[str, int]:
        tamper["mode"] = (flask.request.get_json() or {})["mode"]
        return "", 204

    @app.post("/test/rotate")
    def rotate() -> tuple[str, int]:
        storage().jwk = AuthlibRSAKey.generate_key(is_private=True)
        return "", 204

    @app.after_request
    def altered(response: flask.Response) -> flask.Response:
        mode = tamper["mode"]
        if mode is None or flask.request.path != "/oauth2/token" or response.status_code != 200:
            return response
        tamper["mode"] = None
        body = json.loads(response.get_data())
        key = RSAKey.import_key(storage().jwk.as_dict(is_private=True))
        token = jwt.decode(body["id_token"], key)
        claims, header = dict(token.claims), dict(token.header)
        if mode == "expired":
            claims.update(exp=int(time.time()) - 3600, iat=int(time.time()) - 7200)
        elif mode == "wrong_audience":
            claims["aud"] = "another-client"
        elif mode == "wrong_nonce":
            claims["nonce"] = "not-the-nonce-firstlume-sent"
        if mode == "other_key":
            other = RSAKey.generate_key(2048, parameters={"kid": header.get("kid", "")}, private=True)
            body["id_token"] = jwt.encode(header, claims, other)
        elif mode == "forged":
            signed_header, _, signature = body["id_token"].split(".")
            claims["email"] = "mallory@example.com"
            forged = jwt.encode(header, claims, key).split(".")[1]
            body["id_token"] = ".".join((signed_header, forged, signature))
        else:
            body["id_token"] = jwt.encode(header, claims, key)
        response.set_data(json.dumps(body))
        return response

    werkzeug.serving.make_server("127.0.0.1", port, app, threaded=True).serve_forever()


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
