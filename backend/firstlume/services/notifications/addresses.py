"""Where a webhook may be sent. A webhook URL is a server-side request forgery vector: someone who
may add a destination could otherwise make the control plane post to its own admin ports, a
cloud metadata service or the internal network. Hosts that resolve to loopback, link-local,
private, multicast or otherwise reserved addresses are refused, unless
FIRSTLUME_ALLOW_PRIVATE_WEBHOOKS=true (a lab, or tests with a local receiver). Checked when a
destination is saved and again before each attempt (DNS may have changed since)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit


class PrivateAddress(ValueError):
    """The URL's host is (or resolves to) an address webhooks may not reach."""


def _forbidden(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address.is_loopback
        or address.is_link_local
        or address.is_private
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


async def resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


async def check_webhook_url(url: str, *, allow_private: bool) -> None:
    """Raises PrivateAddress when `url`'s host may not be reached, or does not resolve."""
    parsed = urlsplit(url)
    host = parsed.hostname or ""
    if allow_private:
        return
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [str(literal)]
    else:
        try:
            addresses = await resolve(host, parsed.port or (443 if parsed.scheme == "https" else 80))
        except OSError as error:
            raise PrivateAddress(f"the host {host} does not resolve ({error.strerror or error})") from None
    for address in addresses:
        if _forbidden(ipaddress.ip_address(address.split("%", 1)[0])):
            raise PrivateAddress(
                f"the host {host} is a loopback, link-local or private address ({address}); "
                "webhooks may only reach public addresses unless FIRSTLUME_ALLOW_PRIVATE_WEBHOOKS=true"
            )
