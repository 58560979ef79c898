"""The object types of the schema, by aggregate: catalog (viewer, organizations, folders, stacks),
runs, changes, settings (and variables). Each wraps a read-layer record and the Loaders of its
operation (or subscription event), and reads related rows only through those loaders."""

from __future__ import annotations

from firstlume.api.graphql.enums import VariableKind
from firstlume.api.graphql.types.catalog import Folder, Organization, RunConnection, Stack, Viewer
from firstlume.api.graphql.types.changes import Changes, ChangeSummary, ResourceChange
from firstlume.api.graphql.types.pagination import PageInfo
from firstlume.api.graphql.types.runs import LogChunk, Run, Step
from firstlume.api.graphql.types.settings import EffectiveSettings, Settings, Variable

__all__ = [
    "ChangeSummary",
    "Changes",
    "EffectiveSettings",
    "Folder",
    "LogChunk",
    "Organization",
    "PageInfo",
    "ResourceChange",
    "Run",
    "RunConnection",
    "Settings",
    "Stack",
    "Step",
    "Variable",
    "VariableKind",
    "Viewer",
]
