"""The TLS context of the control plane's outgoing HTTPS clients (notifications, Git host feedback)."""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def public_tls_context() -> ssl.SSLContext:
    """The public CA bundle, loaded once per process. Loading it takes ~30 ms of CPU: not once per
    sender (a served control plane makes one of each; the in-process tests start the app, and so
    its senders, per test). A context is safe to share between clients."""
    return httpx.create_ssl_context(trust_env=False)
