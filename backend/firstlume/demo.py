"""The embedded demo: an organization, a user token and a stack backed by a local Git repository
made from the example configuration shipped in the package."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pygit2
from sqlalchemy import select

from firstlume.db.models import Organization, Stack
from firstlume.services import accounts, catalog
from firstlume.services.commands import CreateStack
from firstlume.services.context import Context
from firstlume.services.reads.catalog import org_record

EXAMPLE = Path(__file__).parent / "examples" / "demo-stack"
DEMO_ORG = "demo"
DEMO_STACK = "demo"
# Inside the data dir; executors in a sandbox see it, read-only, and nothing else of the data dir.
DEMO_REPOSITORY = "demo-repo"
DEMO_USER = "demo@example.com"


@dataclass(frozen=True)
class Demo:
    org: str
    stack: str
    token: str


def make_demo_repository(target: Path) -> str:
    """A Git repository with the example on branch main; returns its file:// URL.

    The example declares no backend, so its state is kept in Firstlume (managed state): the
    executor points Terraform's http backend at the control plane."""
    if not (target / ".git").exists():
        target.mkdir(parents=True, exist_ok=True)
        for item in EXAMPLE.iterdir():
            shutil.copy(item, target / item.name)
        repo = pygit2.init_repository(str(target), initial_head="main")
        repo.index.add_all()
        repo.index.write()
        tree = repo.index.write_tree()
        author = pygit2.Signature("Firstlume Demo", DEMO_USER)
        repo.create_commit("HEAD", author, author, "Demo stack: network, database and app", tree, [])
    return target.resolve().as_uri()


async def seed_demo(ctx: Context) -> Demo:
    data_dir = ctx.settings.data_dir
    url = make_demo_repository(data_dir / DEMO_REPOSITORY)
    async with ctx.unit() as unit:
        session = unit.session
        found = await session.scalar(select(Organization).where(Organization.slug == DEMO_ORG))
        org = org_record(found) if found is not None else await accounts.create_org(session, DEMO_ORG, "Demo")
        token = await accounts.create_token(session, DEMO_ORG, DEMO_USER, name="demo")
        if (
            await session.scalar(select(Stack.id).where(Stack.org_id == org.id, Stack.slug == DEMO_STACK))
            is None
        ):
            await catalog.create_stack(
                session,
                ctx.keyring,
                org,
                CreateStack(slug=DEMO_STACK, name="Demo", folder="examples", repository=url),
            )
    return Demo(org=DEMO_ORG, stack=DEMO_STACK, token=token)
