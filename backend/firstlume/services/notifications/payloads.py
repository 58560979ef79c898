"""The bodies of deliveries: Firstlume's JSON (signed with the destination's secret) or a Slack
incoming-webhook message. Only ids, names, statuses, counts and the run's error: never a
variable value or a secret."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime
from typing import Any

from firstlume.db.models import Run
from firstlume.domain.changes import Summary

TEST_EVENT = "test"
# Errors are cut to this length in a body.
MAX_ERROR = 2000


def run_payload(event: str, org_slug: str, stack_slug: str, run: Run) -> dict[str, Any]:
    """What a delivery says of `run`, as of the change it announces; `url` is a path until sent."""
    summary = Summary(
        delete=run.summary_delete,
        replace=run.summary_replace,
        update=run.summary_update,
        create=run.summary_create,
        outputs=run.summary_outputs,
    )
    return {
        "event": event,
        "organization": org_slug,
        "stack": stack_slug,
        "run": {
            "id": run.id,
            "number": run.number,
            "type": str(run.type),
            "status": str(run.status),
            "summary_text": summary.text,
            "error": (run.error or "")[:MAX_ERROR] or None,
            # Who discarded or canceled it (null otherwise).
            "ended_by": run.ended_by,
            # The comment given with the approval or discard that decided it (null otherwise).
            "comment": run.comment,
            "url": f"/orgs/{org_slug}/runs/{run.id}",
        },
    }


def test_payload(org_slug: str, destination_name: str) -> dict[str, Any]:
    return {
        "event": TEST_EVENT,
        "organization": org_slug,
        "stack": None,
        "run": None,
        "destination": destination_name,
    }


def json_body(stored: dict[str, Any], *, delivery_id: str, sent_at: datetime, public_url: str) -> bytes:
    body = {
        "event": stored["event"],
        "delivery": delivery_id,
        "sent_at": sent_at.isoformat().replace("+00:00", "Z"),
        "organization": stored["organization"],
        "stack": stored.get("stack"),
        "run": _with_absolute_url(stored.get("run"), public_url),
    }
    if "destination" in stored:
        body["destination"] = stored["destination"]
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def slack_body(stored: dict[str, Any], *, public_url: str) -> bytes:
    run = _with_absolute_url(stored.get("run"), public_url)
    if run is None:
        text = f"Firstlume test message for *{stored.get('destination', '')}* ({stored['organization']})"
    else:
        # Deliveries written before `ended_by` existed lack it.
        by = f" by {run['ended_by']}" if run.get("ended_by") else ""
        text = (
            f"*{stored['event']}*: run #{run['number']} ({run['type']}) of *{stored['stack']}* is "
            f"{run['status']}{by}: {run['summary_text']}"
        )
        if run.get("comment"):
            text += f"\n> “{run['comment']}”"
        if run.get("error"):
            text += f"\n> {run['error'][:300]}"
        text += f"\n<{run['url']}|Open the run>"
    return json.dumps({"text": text}).encode()


def signature(secret: str, body: bytes) -> str:
    """X-Firstlume-Signature: sha256=<hex HMAC-SHA256 of the body>."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _with_absolute_url(run: dict[str, Any] | None, public_url: str) -> dict[str, Any] | None:
    if run is None:
        return None
    return {**run, "url": public_url.rstrip("/") + run["url"]}
