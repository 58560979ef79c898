"""Configuration versions: the code a `terraform plan` uploads. Created pending with an upload
URL whose secret is the only credential of the CLI's PUT (it sends no token); the upload is
checked whole (domain/tarballs.py) before anything is stored, then sealed at rest, bound to its
id, and kept as long as the runs that plan it."""

from __future__ import annotations

import secrets

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing, hash_token
from firstlume.db.models_cli import ConfigurationVersion
from firstlume.db.types import utcnow
from firstlume.domain.errors import Conflict, InvalidRequest, NotFound
from firstlume.domain.tarballs import UnsafeTarball, check_tarball
from firstlume.services.context import Actor, Unit
from firstlume.services.reads.catalog import StackRecord

PENDING, UPLOADED, ERRORED = "pending", "uploaded", "errored"


class UploadRefused(InvalidRequest):
    code = "invalid_configuration"


def archive_context(cv_id: str) -> str:
    return f"configuration-version:{cv_id}"


async def create(
    session: AsyncSession, actor: Actor, stack: StackRecord, *, speculative: bool
) -> tuple[ConfigurationVersion, str]:
    """A pending configuration version and its upload secret (shown once, in the upload URL)."""
    secret = secrets.token_urlsafe(32)
    version = ConfigurationVersion(
        org_id=stack.org_id,
        stack_id=stack.id,
        status=PENDING,
        speculative=speculative,
        upload_secret_hash=hash_token(secret),
        archive_bytes=0,
        files=0,
        created_by_id=actor.user_id,
    )
    session.add(version)
    await session.flush()
    return version, secret


async def in_org(session: AsyncSession, org_id: str, cv_id: str) -> ConfigurationVersion:
    found = await session.scalar(
        select(ConfigurationVersion).where(
            ConfigurationVersion.id == cv_id, ConfigurationVersion.org_id == org_id
        )
    )
    if found is None:
        raise NotFound(f"No configuration version '{cv_id}' in this organization.")
    return found


async def upload(unit: Unit, keyring: KeyRing, cv_id: str, secret: str, data: bytes) -> ConfigurationVersion:
    """Stores the archive once, if it is safe; a refused one stores nothing (its version stays
    pending, so that a good upload may follow)."""
    version = await unit.session.scalar(
        select(ConfigurationVersion)
        .where(
            ConfigurationVersion.id == cv_id, ConfigurationVersion.upload_secret_hash == hash_token(secret)
        )
        .with_for_update()
    )
    if version is None:
        raise NotFound("No configuration version waits for an upload at this URL.")
    if version.status != PENDING:
        raise Conflict("This configuration version was uploaded already; create a new one.")
    try:
        summary = check_tarball(data)
    except UnsafeTarball as error:
        raise UploadRefused(str(error) + " Nothing was stored.") from None
    version.archive_sealed = keyring.encrypt(data, archive_context(version.id))
    version.archive_bytes = len(data)
    version.files = summary.files
    version.status = UPLOADED
    version.uploaded_at = utcnow()
    return version


async def archive(session: AsyncSession, keyring: KeyRing, cv_id: str) -> bytes:
    sealed = await session.scalar(
        select(ConfigurationVersion.archive_sealed).where(ConfigurationVersion.id == cv_id)
    )
    if sealed is None:
        raise NotFound(f"The configuration version {cv_id} has no uploaded code.")
    return keyring.decrypt(sealed, archive_context(cv_id))
