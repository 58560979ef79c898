"""The levels settings and variables are set at (an organization, a folder, a stack), as the
writers (services/inherited.py) and the batch reads (services/reads/settings.py) both name them."""

from __future__ import annotations

from typing import Any

from firstlume.db.models import Folder, Organization, Stack
from firstlume.domain.inheritance import SETTING_NAMES

Scope = Organization | Folder | Stack


def scope_name(scope: Scope) -> str:
    return {Organization: "organization", Folder: "folder", Stack: "stack"}[type(scope)]


def org_id_of(scope: Scope) -> str:
    return scope.id if isinstance(scope, Organization) else scope.org_id


def explicit_settings(scope: Scope) -> dict[str, Any]:
    return {name: getattr(scope, name) for name in SETTING_NAMES}
