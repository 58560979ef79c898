"""The resources of a Terraform state document, and what changed between two of them, without
I/O. Only names come out (address, type, provider): never an attribute value, so a list or a
diff can be shown to whoever may see a run's planned addresses.

A state lists each resource once with its instances (`count` and `for_each` make several); the
address people read is the instance's: `module.net.aws_subnet.private["a"]`."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

# The registry most providers come from: shown without it, as Terraform's own messages do.
DEFAULT_REGISTRY = "registry.terraform.io/"


@dataclass(frozen=True, slots=True)
class StateResource:
    address: str
    type: str
    provider: str
    # A digest of the instance's attributes: two versions' instances differ when it does.
    fingerprint: str


@dataclass(frozen=True, slots=True)
class StateDiff:
    added: list[StateResource]
    removed: list[StateResource]
    changed: list[StateResource]


def provider_name(provider: object) -> str:
    """`provider["registry.terraform.io/hashicorp/aws"].west` → `hashicorp/aws.west`."""
    text = str(provider or "")
    if text.startswith('provider["') and '"]' in text:
        source, _, alias = text[len('provider["') :].partition('"]')
        text = source.removeprefix(DEFAULT_REGISTRY) + alias
    return text


def _index(key: object) -> str:
    if key is None:
        return ""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"[{key}]"
    return f"[{json.dumps(key)}]"


def _fingerprint(instance: dict[str, Any]) -> str:
    kept = {k: instance.get(k) for k in ("attributes", "attributes_flat", "dependencies", "status")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def resources_of(body: dict[str, Any]) -> list[StateResource]:
    """The managed resource instances of a state, by address (data sources are read, not kept)."""
    found: list[StateResource] = []
    for resource in body.get("resources") or ():
        if not isinstance(resource, dict) or resource.get("mode", "managed") != "managed":
            continue
        module = str(resource.get("module") or "")
        base = f"{module + '.' if module else ''}{resource.get('type', '')}.{resource.get('name', '')}"
        provider = provider_name(resource.get("provider"))
        for instance in resource.get("instances") or ():
            if isinstance(instance, dict):
                found.append(
                    StateResource(
                        address=base + _index(instance.get("index_key")),
                        type=str(resource.get("type", "")),
                        provider=provider,
                        fingerprint=_fingerprint(instance),
                    )
                )
    return sorted(found, key=lambda r: r.address)


def matching(resources: list[StateResource], search: str | None) -> list[StateResource]:
    """Those whose address, type or provider contains `search` (any case)."""
    if not search:
        return resources
    needle = search.lower()
    return [
        r
        for r in resources
        if needle in r.address.lower() or needle in r.type.lower() or needle in r.provider.lower()
    ]


def diff(old: list[StateResource], new: list[StateResource]) -> StateDiff:
    """What `new` added, removed and changed against `old`, by address."""
    before = {r.address: r for r in old}
    after = {r.address: r for r in new}
    return StateDiff(
        added=[r for a, r in after.items() if a not in before],
        removed=[r for a, r in before.items() if a not in after],
        changed=[r for a, r in after.items() if a in before and before[a].fingerprint != r.fingerprint],
    )
