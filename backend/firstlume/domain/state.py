"""Managed state, without I/O: what a Terraform state document and lock info must hold, which
writes keep a unit's history going forward, outputs with sensitive values hidden, and the serial
a saved plan was made against."""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeGuard

from firstlume.domain import json_input
from firstlume.domain.errors import Conflict, InvalidRequest

ROOT_UNIT = "."
SENSITIVE = "(sensitive)"
MAX_LOCK_ID = 200
MAX_LINEAGE = 200
# Lock info fields Terraform sends (statemgr.LockInfo); anything else is dropped.
LOCK_INFO_FIELDS = ("ID", "Operation", "Info", "Who", "Version", "Created", "Path")
MAX_LOCK_FIELD = 2000
# A saved plan's prior state begins with its version, serial and lineage: this much is enough.
PLAN_STATE_HEAD_BYTES = 64 * 1024
_SERIAL = re.compile(rb'"serial"\s*:\s*([0-9]{1,18})')
_UNIT_SEGMENT = re.compile(r"[A-Za-z0-9_.@+=,-]+")


class InvalidState(InvalidRequest):
    code = "invalid_state"


class InvalidLockInfo(InvalidRequest):
    code = "invalid_lock_info"


class LineageMismatch(Conflict):
    code = "lineage_mismatch"


class SerialBehind(Conflict):
    code = "serial_behind"


class SerialConflict(Conflict):
    code = "serial_conflict"


@dataclass(frozen=True)
class StateDocument:
    """A state as Terraform sent it: the exact bytes are what is stored and served again."""

    raw: bytes
    serial: int
    lineage: str
    sha256: str
    resources: int
    body: dict[str, Any]


def reserialed(document: StateDocument, serial: int) -> bytes:
    """The state with another serial, written as Terraform writes a state (indented JSON)."""
    return (json.dumps({**document.body, "serial": serial}, indent=2) + "\n").encode()


def parse_state(raw: bytes) -> StateDocument:
    try:
        body = json_input.loads(raw, what="The state")
    except json_input.JsonRefused as error:
        raise InvalidState(str(error)) from None
    if not isinstance(body, dict):
        raise InvalidState("The state must be a JSON object, as Terraform writes it.")
    version, serial, lineage = body.get("version"), body.get("serial"), body.get("lineage")
    if not _is_int(version):
        raise InvalidState("The state has no 'version' number: it is not a Terraform state.", field="version")
    if not _is_int(serial) or serial < 0:
        raise InvalidState("The state's 'serial' must be a whole number, 0 or more.", field="serial")
    if not isinstance(lineage, str) or not lineage.strip() or len(lineage) > MAX_LINEAGE:
        raise InvalidState(
            f"The state's 'lineage' must be a non-empty string of at most {MAX_LINEAGE} characters.",
            field="lineage",
        )
    resources = body.get("resources", [])
    if not isinstance(resources, list):
        raise InvalidState("The state's 'resources' must be a list.", field="resources")
    return StateDocument(
        raw=raw,
        serial=serial,
        lineage=lineage,
        sha256=hashlib.sha256(raw).hexdigest(),
        resources=count_resources(resources),
        body=body,
    )


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def count_resources(resources: list[Any]) -> int:
    """Managed resource instances (data sources are read, not kept)."""
    count = 0
    for resource in resources:
        if isinstance(resource, dict) and resource.get("mode", "managed") == "managed":
            instances = resource.get("instances")
            count += len(instances) if isinstance(instances, list) else 0
    return count


def check_write(
    current_serial: int | None, current_lineage: str | None, current_sha256: str | None, new: StateDocument
) -> bool:
    """Whether `new` is stored as a new version (False: the current version sent again). A state
    never goes backwards: a foreign lineage, a lower serial, or the same serial with other
    content is refused."""
    if current_serial is None:
        return True
    if current_lineage is not None and new.lineage != current_lineage:
        raise LineageMismatch(
            f"The state's lineage {new.lineage} is not the current one ({current_lineage}): "
            "it belongs to another state, so it was not stored.",
            lineage=current_lineage,
            serial=current_serial,
        )
    if new.serial < current_serial:
        raise SerialBehind(
            f"The state's serial {new.serial} is behind the current serial {current_serial}: "
            "somebody wrote a newer state since this one was read; nothing was stored.",
            serial=current_serial,
        )
    if new.serial == current_serial:
        if new.sha256 == current_sha256:
            return False
        raise SerialConflict(
            f"Serial {new.serial} is already stored with other content; a new state needs a "
            "higher serial. Nothing was stored.",
            serial=current_serial,
        )
    return True


@dataclass(frozen=True)
class Output:
    name: str
    type: Any
    value: Any
    sensitive: bool


def outputs_of(body: dict[str, Any]) -> list[Output]:
    """The root module's outputs by name; a sensitive value is the string "(sensitive)"."""
    outputs = body.get("outputs")
    if not isinstance(outputs, dict):
        return []
    found = []
    for name, output in sorted(outputs.items()):
        if not isinstance(output, dict):
            continue
        sensitive = output.get("sensitive") is True
        found.append(
            Output(
                name=str(name),
                type=output.get("type"),
                value=SENSITIVE if sensitive else output.get("value"),
                sensitive=sensitive,
            )
        )
    return found


def parse_lock_info(raw: bytes) -> dict[str, str]:
    """Terraform's lock info (statemgr.LockInfo) from a LOCK or UNLOCK body; the ID is required."""
    try:
        body = json_input.loads(raw, what="The lock info") if raw.strip() else {}
    except json_input.JsonRefused as error:
        raise InvalidLockInfo(str(error)) from None
    if not isinstance(body, dict):
        raise InvalidLockInfo("The lock info must be a JSON object with an 'ID', as Terraform sends it.")
    lock_id = body.get("ID")
    if not isinstance(lock_id, str) or not lock_id.strip() or len(lock_id) > MAX_LOCK_ID:
        raise InvalidLockInfo(
            f"The lock info needs an 'ID': a non-empty string of at most {MAX_LOCK_ID} characters.",
            field="ID",
        )
    info = {}
    for field in LOCK_INFO_FIELDS:
        value = body.get(field)
        if isinstance(value, str) and "\x00" not in value:
            info[field] = value[:MAX_LOCK_FIELD]
    return info


def seal_context(stack_id: str, unit: str, serial: int) -> str:
    """A sealed state version decrypts only as that serial of that unit of that stack."""
    return f"state:{stack_id}:{unit}:{serial}"


def normalize_unit(unit: str) -> str:
    """A Terragrunt unit's path relative to the stack ("." for the root module)."""
    path = unit.strip().strip("/")
    if path in ("", ROOT_UNIT):
        return ROOT_UNIT
    segments = path.split("/")
    if len(path) > 1000 or any(s in (".", "..") or not _UNIT_SEGMENT.fullmatch(s) for s in segments):
        raise InvalidRequest(
            f"'{unit}' is not a unit path: segments of letters, digits and ._@+=,- separated by '/'.",
            field="unit",
        )
    return path


def plan_state_serial(plan_file: bytes) -> int | None:
    """The serial of the state a saved Terraform plan was made against (its `tfstate` entry),
    0 when there was none, or None when the file is no Terraform plan (a Terragrunt archive)."""
    try:
        with zipfile.ZipFile(io.BytesIO(plan_file)) as archive:
            if "tfstate" not in archive.namelist():
                return 0
            with archive.open("tfstate") as entry:
                head = entry.read(PLAN_STATE_HEAD_BYTES)
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    found = _SERIAL.search(head)
    return int(found.group(1)) if found else 0


def moved_units(planned: dict[str, int], current: dict[str, int]) -> list[tuple[str, int, int]]:
    """(unit, planned serial, current serial) of each unit whose state moved since the plan."""
    return [
        (unit, serial, current.get(unit, 0))
        for unit, serial in sorted(planned.items())
        if current.get(unit, 0) != serial
    ]


def state_moved_message(moved: list[tuple[str, int, int]]) -> str:
    """The run's error when its state moved between plan and apply (the documented wording)."""
    parts = [
        f"serial {before} → {after}" if unit == ROOT_UNIT else f"{unit}: serial {before} → {after}"
        for unit, before, after in moved
    ]
    return f"state changed since the plan ({', '.join(parts)}): plan again"


def lock_wait_reason(holder: str, since: datetime | None, unit: str, now: datetime) -> str:
    """Why a run waits (runs.WAITS_FOR_STATE_LOCK): "waiting for the state lock held by
    ada@example.com since 10:42 UTC" (the date too when it was taken on another day)."""
    text = f"waiting for the state lock held by {holder}"
    if unit != ROOT_UNIT:
        text += f" on unit {unit}"
    if since is not None:
        shape = "%H:%M UTC" if since.date() == now.date() else "%Y-%m-%d %H:%M UTC"
        text += f" since {since.strftime(shape)}"
    return text
