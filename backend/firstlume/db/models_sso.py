"""Tables of single sign-on and roles per folder (adoption-api.md, section 10).

Imported at the end of db/models.py, so that `Base.metadata` holds them wherever the models are
loaded (migrations, tests comparing the schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from firstlume.db.models import Base, new_id
from firstlume.db.types import UTCDateTime, utcnow


class SsoLogin(Base):
    """A sign-in sent to the identity provider and not yet back: what its callback must match
    (state, by hash), and what it needs to finish (the PKCE verifier, the nonce). Taken once:
    the callback deletes it, so a replayed callback finds nothing."""

    __tablename__ = "sso_logins"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    state_hash: Mapped[str] = mapped_column(String(64), unique=True)
    nonce: Mapped[str] = mapped_column(String(128))
    code_verifier: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class SsoMapping(Base):
    """An organization's mapping of the IdP's groups to a role and Firstlume groups."""

    __tablename__ = "sso_mappings"
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    groups: Mapped[dict[str, Any]] = mapped_column(JSON)
    default_role: Mapped[str | None] = mapped_column(String(20), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class FolderGrant(Base):
    """A role on a folder and everything under it, for a member (user:<email>) or a group
    (group:<name>): it raises the member's organization role there, never lowers it."""

    __tablename__ = "folder_grants"
    __table_args__ = (UniqueConstraint("folder_id", "principal"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    folder_id: Mapped[str] = mapped_column(ForeignKey("folders.id", ondelete="CASCADE"))
    principal: Mapped[str] = mapped_column(String(400))
    role: Mapped[str] = mapped_column(String(20))
