"""The organization's Git hosts: where commit statuses and pull request comments go (kind, API
URL), with a token sealed at rest and never returned."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.db.models_git import GitHost
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.git import normalize_repository
from firstlume.domain.pull_requests import HostKind
from firstlume.services import audit
from firstlume.services.commands import PutGitHost
from firstlume.services.reads.catalog import OrganizationRecord


@dataclass(frozen=True)
class HostRecord:
    host: str
    kind: HostKind
    api_url: str
    updated_at: datetime


def token_context(org_id: str, host: str) -> str:
    return f"git-host:{org_id}:{host}"


def host_and_path(repository_url: str) -> tuple[str, str]:
    """("github.com", "acme/infra") of any URL of the repository."""
    host, _, path = normalize_repository(repository_url).partition("/")
    return host, path


def _record(row: GitHost) -> HostRecord:
    return HostRecord(host=row.host, kind=HostKind(row.kind), api_url=row.api_url, updated_at=row.updated_at)


async def put_host(
    session: AsyncSession, keyring: KeyRing, org: OrganizationRecord, host: str, command: PutGitHost
) -> HostRecord:
    name = host.strip().lower()
    sealed = keyring.encrypt_text(command.token, token_context(org.id, name))
    row = await session.get(GitHost, (org.id, name))
    if row is None:
        row = GitHost(org_id=org.id, host=name)
        session.add(row)
    row.kind = command.kind.value
    row.api_url = command.api_url.rstrip("/")
    row.token_sealed = sealed
    row.updated_at = utcnow()
    await session.flush()
    await audit.record(
        session,
        org,
        AuditAction.GIT_HOST_PUT,
        f"git-host:{name}",
        {"kind": row.kind, "api_url": audit.without_credentials(row.api_url)},  # never the token
    )
    return _record(row)


async def list_hosts(session: AsyncSession, org_id: str) -> list[HostRecord]:
    rows = await session.scalars(select(GitHost).where(GitHost.org_id == org_id).order_by(GitHost.host))
    return [_record(row) for row in rows]


@dataclass(frozen=True)
class HostAccess:
    kind: HostKind
    api_url: str
    token: str
    repository_path: str


async def access_for(
    session: AsyncSession, keyring: KeyRing, org_id: str, repository_url: str
) -> HostAccess | None:
    """The host configuration for a repository, token unsealed; None when its host has none."""
    host, path = host_and_path(repository_url)
    row = await session.get(GitHost, (org_id, host))
    if row is None:
        return None
    token = keyring.decrypt_text(row.token_sealed, token_context(org_id, host))
    return HostAccess(kind=HostKind(row.kind), api_url=row.api_url, token=token, repository_path=path)


async def has_host(session: AsyncSession, org_id: str, repository_url: str) -> bool:
    host, _ = host_and_path(repository_url)
    return (
        await session.scalar(select(GitHost.host).where(GitHost.org_id == org_id, GitHost.host == host))
        is not None
    )
