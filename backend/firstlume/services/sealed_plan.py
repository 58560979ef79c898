"""A plan's JSON as it is stored: compressed, then encrypted (AES-256-GCM, bound to its run).

A plan of 10,000 resources is 16 MB of JSON, which zlib's fastest level makes 10 to 30 times
smaller in about 25 ms, outside the interpreter's lock (so beside the changes being worked out
on their thread). Stored whole, it took the database 130 ms, and the plan's changes, which are
written over the same connection in the same transaction, waited for it.

Rows sealed before this was so hold the JSON itself: they read as they are, since JSON text
never starts with the byte that starts a zlib stream."""

from __future__ import annotations

import zlib
from typing import Any

from firstlume.crypto import KeyRing
from firstlume.domain import json_output

# Faster levels compress JSON nearly as well; the time is what the upload waits for.
ZLIB_LEVEL = 1
_ZLIB_HEADER = b"x"  # 0x78: deflate with a 32 KiB window, every level


def plan_context(run_id: str, part: str) -> str:
    """What each sealed part of a run's plan is bound to: a part of one run opens as no other."""
    return f"plan:{run_id}:{part}"


def seal_plan_json(keyring: KeyRing, run_id: str, plan_json: Any) -> bytes:
    return keyring.encrypt(
        zlib.compress(json_output.dumps(plan_json), ZLIB_LEVEL), plan_context(run_id, "plan_json")
    )


def open_plan_json(keyring: KeyRing, run_id: str, sealed: bytes) -> bytes:
    """The JSON text of a sealed plan, whenever it was sealed."""
    data = keyring.decrypt(sealed, plan_context(run_id, "plan_json"))
    return zlib.decompress(data) if data[:1] == _ZLIB_HEADER else data
