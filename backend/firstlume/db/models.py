"""ORM models. Secrets and plan artifacts are stored only as ciphertext (see firstlume.crypto)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from firstlume.db.types import EnumText, UTCDateTime, utcnow
from firstlume.domain.git import StackTrigger
from firstlume.domain.runs import (
    HOLDS_LOCK,
    Phase,
    ResourceState,
    RunStatus,
    RunType,
    StepStatus,
    TriggerKind,
)

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def new_id() -> str:
    return uuid.uuid4().hex


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _id() -> Mapped[str]:
    return mapped_column(String(32), primary_key=True, default=new_id)


class Organization(Base):
    __tablename__ = "organizations"
    id: Mapped[str] = _id()
    slug: Mapped[str] = mapped_column(String(63), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    require_approval: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    confirm_destructive: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    drift_schedule: Mapped[str | None] = mapped_column(String(200), nullable=True)
    approvers: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    forbid_self_approval: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # Inherited setting: the names of the policies evaluated at the end of each plan (null: inherit).
    policies: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    pull_requests_from_forks: Mapped[str | None] = mapped_column(String(30), nullable=True)


class User(Base):
    __tablename__ = "users"
    id: Mapped[str] = _id()
    email: Mapped[str] = mapped_column(String(320), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Membership(Base):
    __tablename__ = "memberships"
    __table_args__ = (UniqueConstraint("org_id", "user_id"),)
    id: Mapped[str] = _id()
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # reader, operator or admin (services/access/roles.py); groups name the member in approvers.
    role: Mapped[str] = mapped_column(String(20), default="reader")
    groups: Mapped[list[str]] = mapped_column(JSON, default=list, server_default=text("'[]'"))


class ApiToken(Base):
    __tablename__ = "api_tokens"
    id: Mapped[str] = _id()
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # "api": a token a person or machine holds; "session": a browser's single sign-on session
    # (services/access/sessions.py), which the same checks authenticate and the same watch ends.
    kind: Mapped[str] = mapped_column(String(10), default="api", server_default="api")


class Folder(Base):
    __tablename__ = "folders"
    __table_args__ = (UniqueConstraint("org_id", "path"),)
    id: Mapped[str] = _id()
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    parent_id: Mapped[str | None] = mapped_column(
        ForeignKey("folders.id", ondelete="CASCADE"), nullable=True, index=True
    )
    name: Mapped[str] = mapped_column(String(100))
    path: Mapped[str] = mapped_column(String(1000))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    require_approval: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    confirm_destructive: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    drift_schedule: Mapped[str | None] = mapped_column(String(200), nullable=True)
    approvers: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    forbid_self_approval: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # Inherited setting: the names of the policies evaluated at the end of each plan (null: inherit).
    policies: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    pull_requests_from_forks: Mapped[str | None] = mapped_column(String(30), nullable=True)


class Stack(Base):
    __tablename__ = "stacks"
    # A deleted stack's slug is "~<id>" (no slug a person gives starts so): its own is freed for
    # a new stack at once, and kept in deleted_slug.
    __table_args__ = (UniqueConstraint("org_id", "slug"),)
    id: Mapped[str] = _id()
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    folder_id: Mapped[str | None] = mapped_column(
        ForeignKey("folders.id", ondelete="RESTRICT"), nullable=True, index=True
    )
    slug: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(200))
    repository: Mapped[str] = mapped_column(String(2000))
    branch: Mapped[str] = mapped_column(String(255), default="main")
    path: Mapped[str] = mapped_column(String(1000), default=".")
    # Git credentials are write-only: stored sealed, never returned.
    git_https_token_sealed: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    git_ssh_key_sealed: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    require_approval: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    confirm_destructive: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    drift_schedule: Mapped[str | None] = mapped_column(String(200), nullable=True)
    approvers: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    forbid_self_approval: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # Inherited setting: the names of the policies evaluated at the end of each plan (null: inherit).
    policies: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    pull_requests_from_forks: Mapped[str | None] = mapped_column(String(30), nullable=True)
    # What a new commit on the branch starts (domain/git.py), and the last head seen: only
    # commits after it start runs; moving it is a compare-and-set, so replicas start one run.
    trigger: Mapped[StackTrigger] = mapped_column(
        EnumText(StackTrigger, 10), default=StackTrigger.MANUAL, server_default=StackTrigger.MANUAL.value
    )
    git_seen_commit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # What a pull request against the branch starts: nothing ("off") or a proposed plan ("plan").
    pull_requests: Mapped[str] = mapped_column(String(10), default="off", server_default="off")
    # Arrival counter: each new run takes the next number under the stack's row lock.
    run_counter: Mapped[int] = mapped_column(Integer, default=0)
    # A deleted stack is kept, with its runs, state versions and audit entries, for the retention
    # period (services/removal.py), readable by admins only, then purged; nothing else sees it.
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    deleted_by: Mapped[str | None] = mapped_column(String(320), nullable=True)
    deleted_slug: Mapped[str | None] = mapped_column(String(63), nullable=True)


class Variable(Base):
    __tablename__ = "variables"
    __table_args__ = (
        UniqueConstraint("org_id", "scope", "scope_id", "name"),
        CheckConstraint("scope IN ('organization', 'folder', 'stack')", name="scope"),
        CheckConstraint("kind IN ('terraform', 'env')", name="kind"),
    )
    id: Mapped[str] = _id()
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    scope: Mapped[str] = mapped_column(String(20))
    # The organization's, folder's or stack's id (the org id for organization scope).
    scope_id: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20), default="terraform")
    sensitive: Mapped[bool] = mapped_column(Boolean, default=False)
    # Every value is sealed, sensitive or not, so no variable value is ever in the clear at rest.
    value_sealed: Mapped[bytes] = mapped_column(LargeBinary)
    # The sealed text is JSON (a number, boolean, list or object), handed to Terraform typed.
    value_json: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


# A proposed run (a pull request's plan) never takes the stack's lock: it is outside the index.
LOCK_STATUSES_SQL = (
    "status IN (" + ", ".join(f"'{s.value}'" for s in sorted(HOLDS_LOCK)) + ") AND NOT proposed"
)


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("stack_id", "number"),
        # One run per stack may hold the lock, enforced by the database itself: two schedulers
        # racing to start runs of one stack cannot both succeed.
        Index(
            "uq_runs_stack_lock",
            "stack_id",
            unique=True,
            sqlite_where=text(LOCK_STATUSES_SQL),
            postgresql_where=text(LOCK_STATUSES_SQL),
        ),
        Index("ix_runs_org_status", "org_id", "status"),
        Index("ix_runs_stack_status_number", "stack_id", "status", "number"),
        # A dependency trigger starts one run of each dependent per upstream run: a second start
        # (a replica, a replayed trigger) hits this index and rolls back.
        Index("uq_runs_upstream_run_stack", "trigger_upstream_run_id", "stack_id", unique=True),
    )
    id: Mapped[str] = _id()
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    stack_id: Mapped[str] = mapped_column(ForeignKey("stacks.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    type: Mapped[RunType] = mapped_column(EnumText(RunType, 20))
    status: Mapped[RunStatus] = mapped_column(EnumText(RunStatus, 30))
    # What started the run: a person (manual), a push to the branch, or the drift schedule.
    trigger_kind: Mapped[TriggerKind] = mapped_column(
        EnumText(TriggerKind, 20), default=TriggerKind.MANUAL, server_default=TriggerKind.MANUAL.value
    )
    trigger_commit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    trigger_delivery: Mapped[str | None] = mapped_column(String(100), nullable=True)
    # Who started it when no user did: "git:<author email>" for a push, "schedule" for drift.
    trigger_actor: Mapped[str | None] = mapped_column(String(400), nullable=True)
    # The upstream apply whose changed outputs started it (a dependency trigger).
    trigger_upstream_run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # A pull request's plan: never applied, outside the stack's lock and queue, no state lock.
    proposed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The pull request as it was when the run started: number, url, title, author, head_sha,
    # base_branch (the trigger's `pull_request`); the pull_requests row it belongs to.
    trigger_pull_request: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    pull_request_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    created_by_id: Mapped[str | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)

    commit_sha: Mapped[str | None] = mapped_column(String(64), nullable=True)
    commit_author: Mapped[str | None] = mapped_column(String(500), nullable=True)
    commit_message: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    commit_url: Mapped[str | None] = mapped_column(String(2000), nullable=True)

    # The rules read when the plan finished, with their origins.
    approval_required: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    approval_required_origin: Mapped[str | None] = mapped_column(String(1100), nullable=True)
    confirm_destructive: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    confirm_destructive_origin: Mapped[str | None] = mapped_column(String(1100), nullable=True)
    approvers: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    approvers_origin: Mapped[str | None] = mapped_column(String(1100), nullable=True)
    forbid_self_approval: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    forbid_self_approval_origin: Mapped[str | None] = mapped_column(String(1100), nullable=True)
    # The policies read when the plan finished (with the origin), each one's result, and what the
    # approval policies added: how many approvals the run needs and who may give them.
    policies: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    policies_origin: Mapped[str | None] = mapped_column(String(1100), nullable=True)
    policy_checks: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    approvals_required: Mapped[int | None] = mapped_column(Integer, nullable=True)
    policy_approvers: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    # The approvals given so far ({"by": email, "at": ISO time}), for runs that need more than one.
    approvals: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    approved_by_id: Mapped[str | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    approved_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # Who ended the run by hand (discarded or canceled it): their email; null for any other end.
    ended_by: Mapped[str | None] = mapped_column(String(320), nullable=True)
    # The comment given with the approval or discard that decided the run (null: none given).
    comment: Mapped[str | None] = mapped_column(Text, nullable=True)
    acknowledged: Mapped[list[str]] = mapped_column(JSON, default=list)

    config_yaml: Mapped[str | None] = mapped_column(Text, nullable=True)
    engine: Mapped[str | None] = mapped_column(String(20), nullable=True)
    # Names, origins, kinds and sensitivity of the variables the plan used; never values.
    variables_used: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    state_backends: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    # The managed state serial of each unit the plan planned against ({unit: serial}, 0 for no
    # state yet); an apply whose state has moved since fails before Terraform starts.
    planned_state_serials: Mapped[dict[str, int] | None] = mapped_column(JSON, nullable=True)
    # The state serial of each upstream stack (by id) whose outputs the plan read, taken when its
    # first attempt started: a plan started again (its executor died) reads the same values.
    dependency_serials: Mapped[dict[str, int] | None] = mapped_column(JSON, nullable=True)

    summary_delete: Mapped[int] = mapped_column(Integer, default=0)
    summary_replace: Mapped[int] = mapped_column(Integer, default=0)
    summary_update: Mapped[int] = mapped_column(Integer, default=0)
    summary_create: Mapped[int] = mapped_column(Integer, default=0)
    # Root module outputs the plan changes (rows in output_changes): a plan of outputs only is
    # still applied, to save them in the state.
    summary_outputs: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # A drift run's baseline: the stack's last successful apply, whose commit (and variables) it
    # planned. Null for other runs, and for a drift run before its plan starts.
    drift_base_run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    has_plan: Mapped[bool] = mapped_column(Boolean, default=False)
    # The apply's failed resources, apart from `error`, which is for failures of the run itself.
    failed_resource_count: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    failed_resource_addresses: Mapped[list[str]] = mapped_column(
        JSON, default=list, server_default=text("'[]'")
    )

    # Execution bookkeeping for the phase in flight.
    phase_attempt: Mapped[int] = mapped_column(Integer, default=0)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    log_length: Mapped[int] = mapped_column(BigInteger, default=0)


class RunStatusChange(Base):
    __tablename__ = "run_status_history"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    from_status: Mapped[RunStatus | None] = mapped_column(EnumText(RunStatus, 30), nullable=True)
    to_status: Mapped[RunStatus] = mapped_column(EnumText(RunStatus, 30))
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    actor: Mapped[str | None] = mapped_column(String(320), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)


class RunStep(Base):
    __tablename__ = "run_steps"
    __table_args__ = (UniqueConstraint("run_id", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(50))
    position: Mapped[int] = mapped_column(Integer)
    status: Mapped[StepStatus] = mapped_column(EnumText(StepStatus, 20), default=StepStatus.PENDING)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class LogChunk(Base):
    __tablename__ = "log_chunks"
    __table_args__ = (UniqueConstraint("run_id", "offset"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    # Character offset of the chunk's first character in the run's whole log.
    offset: Mapped[int] = mapped_column(BigInteger)
    step: Mapped[str] = mapped_column(String(50))
    text: Mapped[str] = mapped_column(Text)
    # When the server received the chunk: the time the log viewer shows beside each of its lines.
    # Null for chunks stored before it was recorded.
    created_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True, default=utcnow)


class PlanArtifact(Base):
    __tablename__ = "plan_artifacts"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    plan_file_sealed: Mapped[bytes] = mapped_column(LargeBinary)
    # Kept with the plan, read by nothing on a run's path: loaded only when asked for (the apply's
    # spec and plan download would otherwise carry a plan's whole JSON, megabytes for a large one).
    plan_json_sealed: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    lock_file_sealed: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    variables_sealed: Mapped[bytes] = mapped_column(LargeBinary)
    plan_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


CHANGES_FILLFACTOR = 70


class ResourceChange(Base):
    """One planned change, computed once from the plan, and its state during the apply. On
    PostgreSQL its pages keep half their room for the state updates (migration 0013 says why)."""

    __tablename__ = "resource_changes"
    __table_args__ = (
        UniqueConstraint("run_id", "unit", "address"),
        Index("ix_resource_changes_run_pos", "run_id", "position"),
        # Counts per group and pages group by group (services/reads/changes.py).
        Index("ix_resource_changes_run_action_pos", "run_id", "action", "position"),
        # Rows are rewritten in bulk (approval, the end of an apply) but no indexed column
        # changes: room left in each page lets PostgreSQL update them in place (HOT), without
        # touching the indexes.
        {"postgresql_with": {"fillfactor": CHANGES_FILLFACTOR}},
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    address: Mapped[str] = mapped_column(String(1000))
    type: Mapped[str] = mapped_column(String(200))
    unit: Mapped[str] = mapped_column(String(1000), default=".")
    action: Mapped[str] = mapped_column(String(20))
    attributes: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    replaced_because: Mapped[list[str]] = mapped_column(JSON, default=list)
    state: Mapped[ResourceState | None] = mapped_column(EnumText(ResourceState, 20), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    stages: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)


class OutputChange(Base):
    """A root module output whose value a plan changes, its values masked as shown (never a
    sensitive value): computed once from the plan, like resource_changes."""

    __tablename__ = "output_changes"
    __table_args__ = (UniqueConstraint("run_id", "unit", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    unit: Mapped[str] = mapped_column(String(1000), default=".")
    name: Mapped[str] = mapped_column(String(1000))
    action: Mapped[str] = mapped_column(String(20))
    before: Mapped[Any] = mapped_column(JSON, nullable=True)
    after: Mapped[Any] = mapped_column(JSON, nullable=True)
    sensitive: Mapped[bool] = mapped_column(Boolean, default=False)


class PhaseToken(Base):
    __tablename__ = "phase_tokens"
    id: Mapped[str] = _id()
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    phase: Mapped[Phase] = mapped_column(EnumText(Phase, 10))
    attempt: Mapped[int] = mapped_column(Integer)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


UNPUBLISHED_SQL = "published_at IS NULL"


class OutboxEvent(Base):
    """An event of a committed change, written in the change's own transaction and published
    after commit by the relay (services/outbox.py), which retries until it succeeds. Published
    rows are kept for a while (the relay's retention) for the consumers that read them later."""

    __tablename__ = "outbox"
    __table_args__ = (
        Index(
            "ix_outbox_unpublished",
            "id",
            sqlite_where=text(UNPUBLISHED_SQL),
            postgresql_where=text(UNPUBLISHED_SQL),
        ),
        Index("ix_outbox_published_at", "published_at"),
    )
    # 64-bit on PostgreSQL: a busy control plane writes millions of events a day.
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # The event's type (protocol/events.py), and the notification it stands for, if any.
    kind: Mapped[str] = mapped_column(String(30))
    notification: Mapped[str | None] = mapped_column(String(50), nullable=True)
    channels: Mapped[list[str]] = mapped_column(JSON)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # Not published before this time: a failed attempt backs off.
    available_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    published_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)


class StateHead(Base):
    """A unit's managed state ("." or a Terragrunt unit's path): its current serial and lineage,
    and its lock. Every write, lock and unlock of the unit locks this row first, so concurrent
    writers (and control-plane replicas) take turns."""

    __tablename__ = "state_heads"
    __table_args__ = (UniqueConstraint("stack_id", "unit"),)
    id: Mapped[str] = _id()
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    stack_id: Mapped[str] = mapped_column(ForeignKey("stacks.id", ondelete="CASCADE"))
    unit: Mapped[str] = mapped_column(String(1000))
    # Null while the unit has no state (never written, or deleted).
    serial: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    lineage: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # The lock: Terraform's lock info as sent, and who holds it (a person, or a run's phase).
    lock_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lock_info: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    lock_user_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    lock_run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), nullable=True)
    lock_phase: Mapped[Phase | None] = mapped_column(EnumText(Phase, 10), nullable=True)
    # Who holds it, as people read it: "ada@example.com" or "run #3 (apply phase)".
    lock_holder: Mapped[str | None] = mapped_column(String(400), nullable=True)
    locked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class StateVersion(Base):
    """One stored state, sealed (AES-GCM bound to stack, unit and serial); every version is kept."""

    __tablename__ = "state_versions"
    __table_args__ = (UniqueConstraint("head_id", "serial"),)
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    head_id: Mapped[str] = mapped_column(ForeignKey("state_heads.id", ondelete="CASCADE"))
    serial: Mapped[int] = mapped_column(BigInteger)
    lineage: Mapped[str] = mapped_column(String(200))
    # Of the plaintext: the same serial sent again with the same content is no conflict.
    sha256: Mapped[str] = mapped_column(String(64))
    resources: Mapped[int] = mapped_column(Integer)
    state_sealed: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    created_by_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    run_id: Mapped[str | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL"), nullable=True, index=True
    )
    run_phase: Mapped[Phase | None] = mapped_column(EnumText(Phase, 10), nullable=True)


class StorageProbe(Base):
    """One row that /readyz writes: whether the database can store anything now (a full disk, a
    database that only reads). Written in place, so it grows nothing."""

    __tablename__ = "storage_probe"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    probed_at: Mapped[datetime] = mapped_column(UTCDateTime, nullable=False)


import firstlume.db.models_git  # noqa: E402, F401  (Git-driven runs' tables join this metadata)

# Modules of other features that add tables to Base (imported so that Base.metadata holds them).
from firstlume.db import models_audit as models_audit  # noqa: E402

# The Terraform CLI's configuration versions and runs (a module of their own, the same metadata).
from firstlume.db import models_cli as _models_cli  # noqa: E402, F401

# Stack dependencies' tables join this metadata too.
from firstlume.db import models_dependencies as _models_dependencies  # noqa: E402, F401

# Tables of drift schedules and notifications (a module of their own, the same metadata).
from firstlume.db import models_drift as _models_drift  # noqa: E402, F401


class Policy(Base):
    """A Rego module of an organization (services/policies): a plan or an approval policy."""

    __tablename__ = "policies"
    __table_args__ = (
        UniqueConstraint("org_id", "name"),
        CheckConstraint("kind IN ('plan', 'approval')", name="kind"),
    )
    id: Mapped[str] = _id()
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    kind: Mapped[str] = mapped_column(String(20))
    description: Mapped[str] = mapped_column(Text, default="")
    rego: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


# Single sign-on: pending sign-ins, each organization's mapping of the IdP's groups, folder grants.
from firstlume.db import models_sso as _models_sso  # noqa: E402, F401
