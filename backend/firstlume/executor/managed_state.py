"""Managed state: when a root module declares no backend, the executor points Terraform's `http`
backend at the control plane for this phase.

The override file holds addresses only. The credentials (the phase token as the Basic password)
go in TF_HTTP_USERNAME / TF_HTTP_PASSWORD: Terraform stores a backend's configuration in
.terraform/ and in the saved plan, and the apply phase, which applies that plan with a token of
its own, must not find the plan phase's dead token there. The file is removed when the phase ends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

OVERRIDE_FILE = "firstlume_backend_override.tf"
MANAGED_BACKEND = "firstlume"
USERNAME = "firstlume-executor"

# Code that keeps its own state: a backend or HCP Terraform's cloud block in `terraform { }`.
_BACKEND_BLOCK = re.compile(r'(?:\bbackend\s*"[^"\n]*"|\bcloud)\s*\{')
_TERRAFORM_BLOCK = re.compile(r"\bterraform\s*\{")
# Terragrunt generates a backend from these.
_TERRAGRUNT_BACKEND = re.compile(r'\bremote_state\s*\{|\bbackend\s*=|\bgenerate\s*"backend"')
_HEREDOC = re.compile(r"<<-?\s*([A-Za-z_][A-Za-z0-9_]*)\s*\n")


@dataclass(frozen=True)
class ManagedUnit:
    unit: str  # "." or a Terragrunt unit's path
    directory: Path


def strip_hcl_noise(text: str) -> str:
    """The text without comments, string contents and heredocs, keeping the quotes, so that
    `backend "s3" {` in a comment or a string is not taken for a block."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "#" or text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif char == '"':
            # A label keeps a placeholder so `backend "s3"` still reads as a labelled block.
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append('"x"')
            i = j + 1
        elif text.startswith("<<", i) and (heredoc := _HEREDOC.match(text, i)):
            marker = heredoc.group(1)
            closing = re.compile(rf"^\s*{re.escape(marker)}\s*$", re.MULTILINE).search(text, heredoc.end())
            i = n if closing is None else closing.end()
            out.append('"x"')
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _terraform_blocks(text: str) -> Iterable[str]:
    """The bodies of the top-level `terraform { … }` blocks of cleaned HCL."""
    for match in _TERRAFORM_BLOCK.finditer(text):
        depth, start = 1, match.end()
        position = start
        while position < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[position], 0)
            position += 1
        yield text[start : position - 1]


def declares_backend(module_dir: Path) -> bool:
    """Whether a root module's .tf (or .tf.json) files declare a backend or a cloud block."""
    for path in sorted(module_dir.glob("*.tf")):
        if path.name == OVERRIDE_FILE:
            continue
        cleaned = strip_hcl_noise(path.read_text(encoding="utf-8", errors="replace"))
        if any(_BACKEND_BLOCK.search(body) for body in _terraform_blocks(cleaned)):
            return True
    for path in sorted(module_dir.glob("*.tf.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        blocks = document.get("terraform") if isinstance(document, dict) else None
        for block in blocks if isinstance(blocks, list) else [blocks]:
            if isinstance(block, dict) and ("backend" in block or "cloud" in block):
                return True
    return False


def terragrunt_declares_backend(unit_dir: Path) -> bool:
    config = unit_dir / "terragrunt.hcl"
    text = strip_hcl_noise(config.read_text(encoding="utf-8", errors="replace")) if config.is_file() else ""
    return bool(_TERRAGRUNT_BACKEND.search(text)) or declares_backend(unit_dir)


def override_text(address: str) -> str:
    return (
        "# Written by the Firstlume executor for this run phase only: the code declares no\n"
        "# backend, so its state is kept in Firstlume. Credentials come from TF_HTTP_PASSWORD.\n"
        "terraform {\n"
        '  backend "http" {\n'
        f"    address        = {json.dumps(address)}\n"
        f"    lock_address   = {json.dumps(address + '/lock')}\n"
        f"    unlock_address = {json.dumps(address + '/lock')}\n"
        "  }\n"
        "}\n"
    )


def state_address(control_plane_url: str, stack_path: str, unit: str) -> str:
    base = control_plane_url.rstrip("/") + stack_path
    return f"{base}/state" if unit == "." else f"{base}/units/{unit}/state"


def write_overrides(units: Iterable[ManagedUnit], control_plane_url: str, stack_path: str) -> list[Path]:
    written = []
    for unit in units:
        path = unit.directory / OVERRIDE_FILE
        path.write_text(
            override_text(state_address(control_plane_url, stack_path, unit.unit)), encoding="utf-8"
        )
        written.append(path)
    return written


def credentials_environment(token: str) -> dict[str, str]:
    return {"TF_HTTP_USERNAME": USERNAME, "TF_HTTP_PASSWORD": token}
