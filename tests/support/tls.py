"""A local certificate authority and a server certificate for `localhost` (the product's own,
firstlume/local_tls.py, made with `cryptography`): the Terraform CLI speaks only HTTPS to a cloud
host, and trusts the CA through SSL_CERT_FILE."""

from __future__ import annotations

from pathlib import Path

from firstlume.local_tls import LocalTls
from firstlume.local_tls import make_local_tls as _make


def make_local_tls(directory: Path, hostnames: tuple[str, ...] = ("localhost",)) -> LocalTls:
    return _make(directory, hostnames, days=1)


__all__ = ["LocalTls", "make_local_tls"]
