"""JSON:API documents: what the CLI sends, validated by typed models (unknown attributes are
ignored, as HCP Terraform ignores them), and what it reads back."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from firstlume.domain.errors import InvalidRequest

JSONAPI = "application/vnd.api+json"


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class Ref(_Lenient):
    type: str | None = None
    id: str = Field(min_length=1, max_length=100)


class Related(_Lenient):
    data: Ref


class WorkspaceAttributes(_Lenient):
    name: str = Field(min_length=1, max_length=200)
    tag_names: list[str] = Field(default_factory=list, alias="tag-names")


class TagAttributes(_Lenient):
    name: str | None = Field(default=None, max_length=255)
    key: str | None = Field(default=None, max_length=255)
    value: str | None = Field(default=None, max_length=255)


class TagRef(_Lenient):
    attributes: TagAttributes = Field(default_factory=TagAttributes)


class TagList(_Lenient):
    data: list[TagRef] = Field(default_factory=list)


class WorkspaceRelationships(_Lenient):
    tags: TagList = Field(default_factory=TagList)
    tag_bindings: TagList = Field(default_factory=TagList, alias="tag-bindings")


class WorkspaceData(_Lenient):
    type: str | None = None
    attributes: WorkspaceAttributes
    relationships: WorkspaceRelationships = Field(default_factory=WorkspaceRelationships)

    def tags(self) -> list[str]:
        """Tags however the CLI sends them: tag-names, tags, or tag bindings (key:value)."""
        named = list(self.attributes.tag_names)
        named += [t.attributes.name for t in self.relationships.tags.data if t.attributes.name]
        for binding in self.relationships.tag_bindings.data:
            if binding.attributes.key:
                value = binding.attributes.value
                named.append(f"{binding.attributes.key}:{value}" if value else binding.attributes.key)
        return named


class WorkspaceDocument(_Lenient):
    data: WorkspaceData


class ConfigurationVersionAttributes(_Lenient):
    speculative: bool = False
    provisional: bool = False
    auto_queue_runs: bool = Field(default=False, alias="auto-queue-runs")


class ConfigurationVersionData(_Lenient):
    attributes: ConfigurationVersionAttributes = Field(default_factory=ConfigurationVersionAttributes)


class ConfigurationVersionDocument(_Lenient):
    data: ConfigurationVersionData = Field(default_factory=ConfigurationVersionData)


class RunAttributes(_Lenient):
    is_destroy: bool = Field(default=False, alias="is-destroy")
    auto_apply: bool | None = Field(default=None, alias="auto-apply")
    message: str | None = Field(default=None, max_length=2000)
    refresh_only: bool = Field(default=False, alias="refresh-only")
    target_addrs: list[str] | None = Field(default=None, alias="target-addrs")
    replace_addrs: list[str] | None = Field(default=None, alias="replace-addrs")


class RunRelationships(_Lenient):
    workspace: Related
    configuration_version: Related | None = Field(default=None, alias="configuration-version")


class RunData(_Lenient):
    attributes: RunAttributes = Field(default_factory=RunAttributes)
    relationships: RunRelationships


class RunDocument(_Lenient):
    data: RunData


class StateVersionAttributes(_Lenient):
    serial: int = Field(ge=0)
    md5: str = Field(min_length=32, max_length=32)
    lineage: str | None = Field(default=None, max_length=200)
    state: str | None = None  # base64 of the state file (the CLI's inline upload)
    force: bool = False


class StateVersionData(_Lenient):
    attributes: StateVersionAttributes


class StateVersionDocument(_Lenient):
    data: StateVersionData


class LockReason(_Lenient):
    reason: str | None = Field(default=None, max_length=1000)


def parse(model: type[BaseModel], body: dict[str, Any]) -> Any:
    """`body` as `model`, or a 422 naming the first field that is wrong."""
    try:
        return model.model_validate(body)
    except ValidationError as error:
        first = error.errors()[0]
        where = "/".join(str(part) for part in first.get("loc", ()))
        raise InvalidRequest(
            f"The document's {where or 'body'} is not valid: {first.get('msg')}.", field=where
        ) from None


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def resource(kind: str, ident: str, attributes: dict[str, Any], relationships: dict[str, Any] | None = None,
             links: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    document: dict[str, Any] = {"id": ident, "type": kind, "attributes": attributes}
    if relationships:
        document["relationships"] = relationships
    if links:
        document["links"] = links
    return document


def related(kind: str, ident: str | None) -> dict[str, Any]:
    return {"data": {"type": kind, "id": ident} if ident is not None else None}


def page_meta(count: int) -> dict[str, Any]:
    """One page holding everything (the CLI pages until current-page reaches total-pages)."""
    return {
        "pagination": {
            "current-page": 1,
            "prev-page": None,
            "next-page": None,
            "total-pages": 1,
            "total-count": count,
            "page-size": max(count, 1),
        }
    }
