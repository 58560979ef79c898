"""Runs: status, steps, commit, approval, configuration, changes and log."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, TypeVar

import strawberry
from strawberry import Private

from firstlume.api.graphql.enums import ChangeAction, ResourceState, StepStatus, VariableKind
from firstlume.api.graphql.loaders import Loaders, known_or_awaited
from firstlume.api.graphql.types.changes import Changes, ChangeSummary
from firstlume.api.graphql.types.pagination import check_first
from firstlume.api.graphql.types.plain import filled
from firstlume.api.graphql.types.policies import GivenApproval, PolicyCheck
from firstlume.api.graphql.types.settings import ResolvedPolicies, ResolvedPrincipals, ResolvedSetting
from firstlume.domain.errors import InvalidRequest
from firstlume.domain.policies import approvals_text
from firstlume.domain.runs import (
    APPROVABLE,
    CANCELABLE,
    FINISHED,
    WAITS_FOR_STATE_LOCK,
    RunStatus,
    RunType,
    TriggerKind,
)
from firstlume.domain.state import lock_wait_reason
from firstlume.services.access.approvers import Verdict, viewer_verdicts
from firstlume.services.logs import LogSlice, read_log
from firstlume.services.reads.catalog import StackRecord
from firstlume.services.reads.changes import ChangeFilter, ChangePageKey, Cursor
from firstlume.services.reads.runs import RunRecord, StepRecord, duration_ms, started_at, summary_of

if TYPE_CHECKING:
    from firstlume.api.graphql.types.catalog import Stack

# Large enough for a client that still reads every change at once; a page of 50 is the norm.
MAX_CHANGES_PAGE = 10_000
DEFAULT_CHANGES_PAGE = 50
T = TypeVar("T")


@strawberry.type
class Commit:
    sha: str
    author: str | None
    message: str | None = strawberry.field(description="The first line of the commit message.")
    url: str | None = strawberry.field(
        description="A browsable link for hosted Git; null for a local repository."
    )


@strawberry.type
class Step:
    name: str
    status: StepStatus
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None

    @classmethod
    def of(cls, row: StepRecord) -> Step:
        return cls(
            name=row.name,
            status=StepStatus(row.status),
            started_at=row.started_at,
            finished_at=row.finished_at,
            duration_ms=duration_ms(row.started_at, row.finished_at),
        )


@strawberry.type
class Approval:
    row: Private[RunRecord]
    loaders: Private[Loaders]
    _decided: Private[tuple[Verdict, Verdict] | None] = None

    # Filled from the run's record when the query asks for the approval: attributes, not a
    # resolver each (a page may ask for the approvals of 100 runs, and a query for 100 pages).
    required: bool | None = filled("Whether approval was required, read when the plan finished.")
    confirm_destructive: bool | None = filled()
    approved_at: datetime | None = filled()
    acknowledged: list[str] = filled("The deleted or replaced addresses confirmed with the approval.")
    approvers: list[str] | None = filled(
        'Who may decide: "user:<email>" and "group:<name>" entries; null: any operator or admin.'
    )
    forbid_self_approval: bool | None = filled(
        "Whether the run's starter (or a push's commit author) may not approve it."
    )

    def __post_init__(self) -> None:
        run = self.row
        self.required = run.approval_required
        self.confirm_destructive = run.confirm_destructive
        self.approved_at = run.approved_at
        self.acknowledged = list(run.acknowledged or [])
        self.approvers = list(run.approvers) if run.approvers is not None else None
        self.forbid_self_approval = run.forbid_self_approval

    @strawberry.field(
        description="How many approvals the run needs: more than one only by its approval policies."
    )
    def approvals_required(self) -> int:
        return self.row.approvals_required or 1

    @strawberry.field(
        description="Who the approval policies let decide (on top of `approvers`); null: no limit."
    )
    def policy_approvers(self) -> list[str] | None:
        return list(self.row.policy_approvers) if self.row.policy_approvers is not None else None

    @strawberry.field(description="The approvals given so far, for a run that needs more than one.")
    def approvals(self) -> list[GivenApproval]:
        return [
            GivenApproval(by=a["by"], at=a["at"], comment=a.get("comment")) for a in self.row.approvals or []
        ]

    @strawberry.field(description='How far the approval is, as "1 of 2"; null for a run that needs one.')
    def approvals_progress(self) -> str | None:
        required = self.row.approvals_required
        return approvals_text(len(self.row.approvals or []), required) if required else None

    @strawberry.field(graphql_type=str | None)
    def approved_by(self) -> str | Awaitable[str | None] | None:
        # Read with the page's starters when the page's query asks (Stack.runs).
        if self.row.approved_by_id is None:
            return None
        return known_or_awaited(self.loaders.email, self.row.approved_by_id)

    @strawberry.field(description="Whether the caller may approve this run now.")
    async def viewer_can_approve(self, info: strawberry.Info) -> bool:
        return (await self._verdicts(info))[0].allowed

    @strawberry.field(
        description="Whether the caller may discard this run now (approvers apply; self-approval does not)."
    )
    async def viewer_can_discard(self, info: strawberry.Info) -> bool:
        return (await self._verdicts(info))[1].allowed

    @strawberry.field(description="Why the caller may not approve this run now; null when they may.")
    async def viewer_cannot_approve_reason(self, info: strawberry.Info) -> str | None:
        return (await self._verdicts(info))[0].reason

    async def _verdicts(self, info: strawberry.Info) -> tuple[Verdict, Verdict]:
        # Read once for the three fields: one statement (the viewer's membership), none when the
        # run is not awaiting approval.
        if self._decided is None:
            actor = info.context.require_actor()
            async with self.loaders.reads.session() as session:
                self._decided = await viewer_verdicts(session, self.row, actor.user_id, actor.email)
        return self._decided


@strawberry.type(description="A variable the plan used: its name and origin, never its value.")
class VariableUsage:
    name: str
    origin: str
    sensitive: bool
    kind: VariableKind


@strawberry.type(description="The approval rules a run read when its plan finished, with their origins.")
class RunRules:
    require_approval: ResolvedSetting
    confirm_destructive: ResolvedSetting
    approvers: ResolvedPrincipals
    forbid_self_approval: ResolvedSetting
    policies: ResolvedPolicies


@strawberry.type
class RunConfiguration:
    config_yaml: str | None = strawberry.field(description="The config.yaml of the commit.")
    engine: str | None
    settings: RunRules | None = strawberry.field(
        description="The rules read when the plan finished, with their origins; null before."
    )
    variables: list[VariableUsage]

    @classmethod
    def of(cls, run: RunRecord) -> RunConfiguration:
        settings = None
        if run.approval_required is not None:
            settings = RunRules(
                require_approval=ResolvedSetting(
                    value=bool(run.approval_required), origin=run.approval_required_origin or ""
                ),
                confirm_destructive=ResolvedSetting(
                    value=bool(run.confirm_destructive), origin=run.confirm_destructive_origin or ""
                ),
                approvers=ResolvedPrincipals(
                    value=list(run.approvers) if run.approvers is not None else None,
                    origin=run.approvers_origin or "default",
                ),
                forbid_self_approval=ResolvedSetting(
                    value=bool(run.forbid_self_approval), origin=run.forbid_self_approval_origin or "default"
                ),
                policies=ResolvedPolicies(value=run.policies, origin=run.policies_origin or "default"),
            )
        return cls(
            config_yaml=run.config_yaml,
            engine=run.engine,
            settings=settings,
            variables=[
                VariableUsage(
                    name=v["name"],
                    origin=v["origin"],
                    sensitive=bool(v["sensitive"]),
                    kind=VariableKind(v.get("kind", "terraform")),
                )
                for v in run.variables_used or []
            ],
        )


@strawberry.type
class StateBackend:
    unit: str
    backend: str


@strawberry.type(description="The pull request a proposed run plans, as it was when the run started.")
class TriggerPullRequest:
    number: int
    url: str
    title: str
    author: str
    head_sha: str
    base_branch: str


@strawberry.type(description="What started the run.")
class RunTrigger:
    kind: TriggerKind
    commit: str | None = strawberry.field(
        description="The pushed commit (push runs), the PR head (proposed runs)."
    )
    delivery: str | None = strawberry.field(
        description="The Git delivery that started it (push and PR runs)."
    )
    pull_request: TriggerPullRequest | None = strawberry.field(
        default=None, description="The pull request (kind pull_request)."
    )
    upstream_run: str | None = strawberry.field(
        default=None, description="The upstream apply whose changed outputs started it (dependency runs)."
    )


@strawberry.type(description="The resources whose apply failed; each one's error is on the resource.")
class FailedResources:
    count: int
    addresses: list[str] = strawberry.field(description="The first 100 addresses, in plan order.")


@strawberry.type(description="Where a piece of a log chunk's text starts, and when the server received it.")
class LogTime:
    index: int = strawberry.field(
        description="The character index in the chunk's `text` where the piece starts."
    )
    at: datetime | None = strawberry.field(description="Null for text stored before times were recorded.")


@strawberry.type(description="A piece of the run's log and the run-level offset just after it.")
class LogChunk:
    text: str
    next_offset: int = strawberry.field(description="Pass as `fromOffset` to continue after this text.")
    times: list[LogTime] = strawberry.field(
        default_factory=list,
        description="When each part of `text` arrived, in order; a line's time is that of the part its "
        "first character is in.",
    )

    @classmethod
    def of(cls, part: LogSlice) -> LogChunk:
        return cls(
            text=part.text,
            next_offset=part.next_offset,
            times=[LogTime(index=index, at=at) for index, at in part.times],
        )


@strawberry.type
class Run:
    row: Private[RunRecord]
    loaders: Private[Loaders]

    id: strawberry.ID = filled()
    number: int = filled("The run's number in its stack, in order of arrival.")
    type: RunType = filled()
    status: RunStatus = filled()
    awaiting_approval: bool = filled("True while the run waits for someone's approval.")
    finished: bool = filled()
    approvable: bool = filled("Whether the run can be approved or discarded now.")
    cancelable: bool = filled("Whether the run can be canceled now.")
    created_at: datetime = filled()
    updated_at: datetime = filled()
    finished_at: datetime | None = filled()
    commit: Commit | None = filled()
    summary: ChangeSummary | None = filled("Null until the plan is stored.")
    error: str | None = filled("The run's error when it failed for a reason that belongs to no resource.")
    log_length: int = filled("The log's length in characters so far.")
    ended_by: str | None = filled("Who discarded or canceled the run (their email); null for any other end.")
    comment: str | None = filled(
        "The comment given with the approval or discard that decided the run; null when none was."
    )

    def __post_init__(self) -> None:
        run = self.row
        status = RunStatus(run.status)
        self.id = strawberry.ID(run.id)
        self.number = run.number
        self.type = RunType(run.type)
        self.status = status
        self.awaiting_approval = status is RunStatus.AWAITING_APPROVAL
        self.approvable = status in APPROVABLE
        self.cancelable = status in CANCELABLE
        self.finished = status in FINISHED
        self.created_at = run.created_at
        self.updated_at = run.updated_at
        self.finished_at = run.finished_at
        self.commit = (
            Commit(
                sha=run.commit_sha, author=run.commit_author, message=run.commit_message, url=run.commit_url
            )
            if run.commit_sha
            else None
        )
        self.summary = ChangeSummary.of(summary_of(run)) if run.has_plan else None
        self.error = run.error
        self.log_length = run.log_length
        self.ended_by = run.ended_by
        self.comment = run.comment

    # Built only when the query asks: a page of runs (a stack's history) rarely does, and every
    # run of the page made them all (about 2% of a stack page's server time, measured with wrk).
    @strawberry.field
    def approval(self) -> Approval:
        return Approval(row=self.row, loaders=self.loaders)

    @strawberry.field
    def configuration(self) -> RunConfiguration:
        return RunConfiguration.of(self.row)

    @strawberry.field(
        description="Each policy's result, evaluated when the plan finished; null before, or for a run "
        "whose plan had no policies to evaluate."
    )
    def policy_checks(self) -> list[PolicyCheck] | None:
        checks = self.row.policy_checks
        return [PolicyCheck.of(c) for c in checks] if checks is not None else None

    @strawberry.field
    def state_backends(self) -> list[StateBackend]:
        return [StateBackend(unit=b["unit"], backend=b["backend"]) for b in self.row.state_backends or []]

    @strawberry.field
    def trigger(self) -> RunTrigger:
        run = self.row
        pull = run.trigger_pull_request
        return RunTrigger(
            kind=TriggerKind(run.trigger_kind),
            commit=run.trigger_commit,
            delivery=run.trigger_delivery,
            upstream_run=run.trigger_upstream_run_id,
            pull_request=TriggerPullRequest(**pull) if pull else None,
        )

    @strawberry.field(description="A pull request's proposed run: it only plans, and is never applied.")
    def proposed(self) -> bool:
        return self.row.proposed

    @strawberry.field(description="The apply's failed resources; none means count 0.")
    def failed_resources(self) -> FailedResources:
        run = self.row
        return FailedResources(
            count=run.failed_resource_count, addresses=list(run.failed_resource_addresses or [])
        )

    # The next three answer at once when their value is known (most of a page of runs), and
    # return an awaitable only when a read is still needed (loaders.known_or_awaited says why).
    @strawberry.field(graphql_type=Annotated["Stack", strawberry.lazy("firstlume.api.graphql.types.catalog")])
    def stack(self) -> Stack | Awaitable[Stack]:
        row = known_or_awaited(self.loaders.stack, self.row.stack_id)
        if isinstance(row, StackRecord):
            return self._stack_object(row)
        assert row is not None  # a run's stack exists as long as the run
        return self._stack_when_read(row)

    async def _stack_when_read(self, pending: Awaitable[StackRecord | None]) -> Stack:
        row = await pending
        assert row is not None
        return self._stack_object(row)

    def _stack_object(self, row: StackRecord) -> Stack:
        """One Stack object per stack row and operation: the runs of a page share it (made for
        each run, it was a fortieth of a page's time)."""
        from firstlume.api.graphql.types.catalog import Stack

        made: Stack | None = self.loaders.stack_objects.get(row.id)
        if made is None or made.row is not row:
            made = self.loaders.stack_objects[row.id] = Stack(row=row, loaders=self.loaders)
        return made

    @strawberry.field(graphql_type=str | None)
    def created_by(self) -> str | Awaitable[str | None] | None:
        # The person's email; for a run nobody started, what did: "git:<author email>", "schedule".
        if self.row.created_by_id:
            return known_or_awaited(self.loaders.email, self.row.created_by_id)
        return self.row.trigger_actor

    # The steps of a page's runs are read with the page when its query asks for them (Stack.runs):
    # these three then answer at once, without a task per run.
    @strawberry.field(
        graphql_type=datetime | None,
        description="When the first phase started; null while the run is queued.",
    )
    def started_at(self) -> datetime | Awaitable[datetime | None] | None:
        return self._from_steps(started_at)

    @strawberry.field(
        graphql_type=int | None,
        description="From the start of the first phase to the end of the run: time in the queue is not "
        "counted. Null until the run has both started and finished.",
    )
    def duration_ms(self) -> int | Awaitable[int | None] | None:
        finished_at = self.row.finished_at
        return self._from_steps(lambda steps: duration_ms(started_at(steps), finished_at))

    @strawberry.field(
        graphql_type=int | None, description="1 = starts next on its stack; null unless queued."
    )
    def queue_position(self) -> int | Awaitable[int | None] | None:
        if self.row.status != RunStatus.QUEUED:
            return None
        return known_or_awaited(self.loaders.queue_position, self.row.id)

    @strawberry.field(
        description="For a run that waits for a state lock a person holds (queued or apply_queued), why: "
        '"waiting for the state lock held by ada@example.com since 10:42 UTC"; else null.'
    )
    async def waiting_for(self) -> str | None:
        if self.row.status not in WAITS_FOR_STATE_LOCK:
            return None
        lock = await self.loaders.person_lock.load(self.row.stack_id)
        return lock_wait_reason(lock.holder, lock.locked_at, lock.unit, datetime.now(UTC)) if lock else None

    @strawberry.field(
        description="For a drift run, the id of the applied run whose commit (and variables) it planned."
    )
    def drift_base_run_id(self) -> strawberry.ID | None:
        base = self.row.drift_base_run_id
        return strawberry.ID(base) if base else None

    @strawberry.field(description="For a queued run, the run that holds its stack's lock; else null.")
    async def blocked_by(self) -> Run | None:
        if self.row.status != RunStatus.QUEUED:
            return None
        holder = await self.loaders.lock_holder.load(self.row.stack_id)
        return Run(row=holder, loaders=self.loaders) if holder else None

    @strawberry.field(
        graphql_type=list[Step],
        description="checkout, init, plan, approval, apply, … as far as the run has come.",
    )
    def steps(self) -> list[Step] | Awaitable[list[Step]]:
        return self._from_steps(lambda steps: [Step.of(s) for s in steps])

    def _from_steps(self, answer: Callable[[list[StepRecord]], T]) -> T | Awaitable[T]:
        steps = known_or_awaited(self.loaders.steps, self.row.id)
        if isinstance(steps, list):
            return answer(steps)
        return self._when_read(steps, answer)

    @staticmethod
    async def _when_read(pending: Awaitable[list[StepRecord]], answer: Callable[[list[StepRecord]], T]) -> T:
        return answer(await pending)

    @strawberry.field(
        description=f"The planned changes: counts per group, and a page of the changes that match the "
        f"filters. `first` is at most {MAX_CHANGES_PAGE}; `text` matches part of the address, "
        "ignoring case; `state` the change's state in the apply (failed, not applied, …)."
    )
    def changes(
        self,
        first: int = DEFAULT_CHANGES_PAGE,
        after: str | None = None,
        action: ChangeAction | None = None,
        type: str | None = None,
        unit: str | None = None,
        text: str | None = None,
        state: ResourceState | None = None,
    ) -> Changes:
        check_first(first, MAX_CHANGES_PAGE)
        change_filter = ChangeFilter(
            action=action.value if action is not None else None,
            type=type,
            unit=unit,
            text=text or None,
            state=state.value if state is not None else None,
        )
        cursor = Cursor.parse(after) if after is not None else None
        return Changes(
            key=ChangePageKey(self.row.id, first, cursor, change_filter),
            loaders=self.loaders,
            summary=ChangeSummary.of(summary_of(self.row)),
            drift=self.row.type == RunType.DRIFT,
        )

    @strawberry.field(description="The log (or one step's) from a run-level character offset.")
    async def log(self, step: str | None = None, from_offset: int = 0) -> LogChunk:
        if from_offset < 0:
            raise InvalidRequest("'fromOffset' must not be negative.", field="fromOffset")
        async with self.loaders.reads.session() as session:
            part = await read_log(session, self.row.id, from_offset, step)
        return LogChunk.of(part)
