"""Git-driven runs: the organization's webhook secret, the delivery log, and the lease that
lets one replica poll per interval. The stack's trigger and last seen head are on `stacks`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from firstlume.db.models import Base
from firstlume.db.types import UTCDateTime, utcnow


class GitWebhookSecret(Base):
    """The organization's webhook secret, sealed (context "git-webhook:<org id>"); write-only."""

    __tablename__ = "git_webhook_secrets"
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    secret_sealed: Mapped[bytes] = mapped_column(LargeBinary)
    rotated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class GitDelivery(Base):
    """A webhook delivery (accepted, ignored or refused) or a poll that found a new head."""

    __tablename__ = "git_deliveries"
    __table_args__ = (
        # A host's delivery id is taken once per organization, by the accepted delivery only, so
        # a replay (even a concurrent one) starts nothing. Refused and poll rows leave it null.
        UniqueConstraint("org_id", "accepted_delivery"),
        Index("ix_git_deliveries_org_id", "org_id", "id"),
    )
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # "webhook:github" | "webhook:gitea" | "webhook:gitlab" | "webhook" (no dialect) | "poll"
    source: Mapped[str] = mapped_column(String(30))
    delivery: Mapped[str | None] = mapped_column(String(100), nullable=True)
    accepted_delivery: Mapped[str | None] = mapped_column(String(100), nullable=True)
    event: Mapped[str | None] = mapped_column(String(100), nullable=True)
    repository: Mapped[str | None] = mapped_column(String(2000), nullable=True)
    ref: Mapped[str | None] = mapped_column(String(300), nullable=True)
    head: Mapped[str | None] = mapped_column(String(64), nullable=True)
    http_status: Mapped[int] = mapped_column(Integer, default=200)
    # {"runs": [ids], "ignored": [{"stack", "reason"}]}, or {"refused": code, "message"}.
    result: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class GitPollLease(Base):
    """One row per poll loop: the replica that moves `next_at` forward polls this interval."""

    __tablename__ = "git_poll_lease"
    name: Mapped[str] = mapped_column(String(50), primary_key=True)
    next_at: Mapped[datetime] = mapped_column(UTCDateTime())
    holder: Mapped[str | None] = mapped_column(String(100), nullable=True)


class PullRequest(Base):
    """A pull (merge) request of a repository some stack follows, as its last webhook described
    it; its proposed runs point here (runs.pull_request_id)."""

    __tablename__ = "pull_requests"
    __table_args__ = (
        UniqueConstraint("org_id", "repository", "number"),
        Index("ix_pull_requests_org_state", "org_id", "state", "updated_at"),
    )
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    # The base repository's URL as the webhook named it first (normalized for matching).
    repository: Mapped[str] = mapped_column(String(2000))
    number: Mapped[int] = mapped_column(Integer)
    url: Mapped[str] = mapped_column(String(2000))
    title: Mapped[str] = mapped_column(String(1000))
    author: Mapped[str] = mapped_column(String(400))
    head_sha: Mapped[str] = mapped_column(String(64))
    base_branch: Mapped[str] = mapped_column(String(255))
    # "open" | "closed" | "merged"
    state: Mapped[str] = mapped_column(String(10))
    from_fork: Mapped[bool] = mapped_column(Boolean, default=False)
    dialect: Mapped[str] = mapped_column(String(10))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # The host's id of Firstlume's one comment on the pull request, once created (then edited).
    comment_id: Mapped[str | None] = mapped_column(String(100), nullable=True)


class GitHost(Base):
    """A Git host's REST API that receives commit statuses and pull request comments, per
    organization and host name (e.g. "github.com"); the token sealed ("git-host:<org>:<host>")."""

    __tablename__ = "git_hosts"
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    host: Mapped[str] = mapped_column(String(255), primary_key=True)
    kind: Mapped[str] = mapped_column(String(10))
    api_url: Mapped[str] = mapped_column(String(2000))
    token_sealed: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class GitFeedback(Base):
    """One message to a Git host: a commit status (snapshot in `payload`) or the pull request's
    comment (its text is built when sent, so it is always the newest). Written in the transaction
    of the run change it reports (the outbox), sent after commit by any replica with retries and
    backoff; each attempt is kept in `attempts_log`."""

    __tablename__ = "git_feedback"
    __table_args__ = (Index("ix_git_feedback_due", "delivered_at", "given_up_at", "next_attempt_at"),)
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    pull_request_id: Mapped[str] = mapped_column(ForeignKey("pull_requests.id", ondelete="CASCADE"))
    # "status" | "comment"
    kind: Mapped[str] = mapped_column(String(10))
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # A status: {"sha", "state", "context", "description", "target_url"}.
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    leased_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    given_up_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # [{"at", "status_code", "error"}], oldest first.
    attempts_log: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
