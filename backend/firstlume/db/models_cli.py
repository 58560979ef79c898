"""The Terraform CLI's tables: configuration versions (the code `terraform plan` uploads, sealed
at rest) and which run each CLI run is (its configuration and whether the CLI asked to apply
without a "yes")."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, ForeignKey, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from firstlume.db.models import Base, new_id
from firstlume.db.types import UTCDateTime, utcnow


class ConfigurationVersion(Base):
    __tablename__ = "configuration_versions"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    stack_id: Mapped[str] = mapped_column(ForeignKey("stacks.id", ondelete="CASCADE"), index=True)
    # pending (waiting for its upload), uploaded, or errored (the upload was refused).
    status: Mapped[str] = mapped_column(String(20), default="pending")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    speculative: Mapped[bool] = mapped_column(Boolean, default=False)
    # The upload URL's secret, hashed: the CLI's PUT carries no token.
    upload_secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # The .tar.gz, sealed (AES-GCM bound to this id); null until uploaded.
    archive_sealed: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True, deferred=True)
    archive_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    files: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    created_by_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    uploaded_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class CliRun(Base):
    """A run the CLI started: the configuration it plans, and whether the CLI confirms it itself
    (`terraform apply` asks "yes"; `-auto-approve` does not)."""

    __tablename__ = "cli_runs"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    configuration_version_id: Mapped[str] = mapped_column(
        ForeignKey("configuration_versions.id", ondelete="CASCADE"), index=True
    )
    auto_apply: Mapped[bool] = mapped_column(Boolean, default=False)
    message: Mapped[str | None] = mapped_column(String(2000), nullable=True)


class StackTag(Base):
    """A workspace tag (`workspaces { tags = [...] }` in a `cloud` block): the CLI lists, creates
    and selects the stacks that carry all of its tags."""

    __tablename__ = "stack_tags"
    __table_args__ = (UniqueConstraint("stack_id", "tag"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    stack_id: Mapped[str] = mapped_column(ForeignKey("stacks.id", ondelete="CASCADE"))
    tag: Mapped[str] = mapped_column(String(255))


class CliLoginCode(Base):
    """An authorization code of `terraform login` (OAuth 2.0 with PKCE), between the person's
    "Allow" in the browser and the CLI's exchange of it for a token. Only its hash is kept; it
    is bound to the client, the redirect URI and the PKCE challenge it was issued for, and to
    the person. Spent at its first exchange (used_at), right or wrong, so a guessed verifier
    gets one try; a replay finds it spent and revokes the token it gave (RFC 6749 §4.1.2)."""

    __tablename__ = "cli_login_codes"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    client_id: Mapped[str] = mapped_column(String(100))
    redirect_uri: Mapped[str] = mapped_column(String(200))
    code_challenge: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    token_id: Mapped[str | None] = mapped_column(
        ForeignKey("api_tokens.id", ondelete="SET NULL"), nullable=True
    )
