"""The embedded demo: an organization, a user token and a stack backed by a local Git repository
made from the example configuration shipped in the package."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pygit2
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import hash_token
from firstlume.db.models import ApiToken, Organization, Stack, User
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import Unauthenticated
from firstlume.services import accounts, audit, catalog
from firstlume.services.commands import CreateStack
from firstlume.services.context import Context
from firstlume.services.reads.catalog import org_record

EXAMPLE = Path(__file__).parent / "examples" / "demo-stack"
DEMO_ORG = "demo"
DEMO_STACK = "demo"
# Inside the data dir; executors in a sandbox see it, read-only, and nothing else of the data dir.
DEMO_REPOSITORY = "demo-repo"
DEMO_USER = "demo@example.com"
DEMO_TOKEN_NAME = "demo"
# The demo token, kept (readable by its owner only) so that each `make run` prints the same one.
DEMO_TOKEN_FILE = "demo-token"


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


def _keep(path: Path, token: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")


def _read_kept(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


async def _kept_token(session: AsyncSession, token: str | None) -> str | None:
    """The demo token of an earlier `make run`, if it is still the demo user's and usable."""
    if token is None:
        return None
    try:
        actor = await accounts.authenticate(session, token)
    except Unauthenticated:
        return None
    return token if actor.email == DEMO_USER else None


async def _revoke_other_demo_tokens(session: AsyncSession, org_id: str, token: str) -> None:
    """Earlier demo tokens (each `make run` used to make one) stop working: one demo token."""
    others = await session.scalars(
        select(ApiToken)
        .join(User, User.id == ApiToken.user_id)
        .where(
            User.email == DEMO_USER,
            ApiToken.name == DEMO_TOKEN_NAME,
            ApiToken.revoked_at.is_(None),
            ApiToken.token_hash != hash_token(token),
        )
    )
    for row in others:
        row.revoked_at = utcnow()
        await audit.record(
            session,
            org_id,
            AuditAction.TOKEN_REVOKE,
            f"token:{row.id}",
            {"name": row.name, "user": DEMO_USER},
        )


async def seed_demo(ctx: Context) -> Demo:
    """Seeds the demo once; every later call reuses the demo token kept in the data dir (the
    same exports keep working across restarts), making a new one only when that one no longer
    works (a new database, or the token revoked), and revoking any other demo token."""
    data_dir = ctx.settings.data_dir
    url = make_demo_repository(data_dir / DEMO_REPOSITORY)
    token_file = data_dir / DEMO_TOKEN_FILE
    async with ctx.unit() as unit:
        session = unit.session
        found = await session.scalar(select(Organization).where(Organization.slug == DEMO_ORG))
        org = org_record(found) if found is not None else await accounts.create_org(session, DEMO_ORG, "Demo")
        token = await _kept_token(session, _read_kept(token_file))
        if token is None:
            token = await accounts.create_token(session, DEMO_ORG, DEMO_USER, name=DEMO_TOKEN_NAME)
            _keep(token_file, token)
        await _revoke_other_demo_tokens(session, org.id, token)
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
