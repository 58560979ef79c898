"""A workspace is a stack: found by name (its slug), created on first use without a repository
(its runs carry their code, uploaded by the CLI)."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.db.models_cli import StackTag
from firstlume.domain.errors import InvalidRequest
from firstlume.services import catalog
from firstlume.services.commands import CreateStack, Slug
from firstlume.services.context import Unit
from firstlume.services.reads import catalog as catalog_reads
from firstlume.services.reads.catalog import OrganizationRecord, StackRecord

# A stack the CLI made has no repository: each run plans the configuration version it names.
NO_REPOSITORY = ""


class _WorkspaceName(BaseModel):
    slug: Slug


def checked_name(name: object) -> str:
    """A workspace name as a stack slug, or a 422 saying what a name may be."""
    try:
        return _WorkspaceName.model_validate({"slug": name}).slug
    except ValidationError as error:
        reason = error.errors()[0].get("msg", "it is not a valid name")
        raise InvalidRequest(
            f"The workspace name {name!r} cannot be a stack's slug: {reason}.", field="name"
        ) from None


MAX_TAG = 255


def checked_tags(tags: list[str]) -> list[str]:
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip() or len(tag) > MAX_TAG or "," in tag:
            raise InvalidRequest(
                f"A workspace tag is a non-empty text of at most {MAX_TAG} characters without commas; got {tag!r}.",
                field="tag-names",
            )
    return sorted(set(tags))


async def tags_of(session: AsyncSession, stack_ids: list[str]) -> dict[str, list[str]]:
    rows = await session.execute(
        select(StackTag.stack_id, StackTag.tag).where(StackTag.stack_id.in_(stack_ids)).order_by(StackTag.tag)
    )
    found: dict[str, list[str]] = {stack_id: [] for stack_id in stack_ids}
    for stack_id, tag in rows:
        found[stack_id].append(tag)
    return found


async def ensure_workspace(
    unit: Unit, keyring: KeyRing, org: OrganizationRecord, name: str, tags: list[str] | None = None
) -> tuple[StackRecord, bool]:
    """The stack named `name`, created (without a repository, with `tags`) when there is none yet."""
    slug = checked_name(name)
    wanted = checked_tags(tags or [])
    found = await catalog_reads.stack_by_slug(unit.session, org.id, slug)
    if found is not None:
        return found, False
    command = CreateStack.model_construct(
        slug=slug,
        repository=NO_REPOSITORY,
        name=None,
        folder=None,
        branch=None,
        path=None,
        git_https_token=None,
        git_ssh_key=None,
        trigger=None,
    )
    stack = await catalog.create_stack(unit.session, keyring, org, command)
    unit.session.add_all([StackTag(stack_id=stack.id, tag=tag) for tag in wanted])
    await unit.session.flush()
    return stack, True
