"""What executors report, and how the control plane records it. Executors authenticate with a
token valid for one phase of one run; everything here checks that the run is still in that phase."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any, cast

from sqlalchemy import Select, Table, bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import hash_token
from firstlume.db.bulk import count_failed_resources
from firstlume.db.models import (
    LogChunk,
    Organization,
    OutputChange,
    PhaseToken,
    PlanArtifact,
    ResourceChange,
    Run,
    Stack,
)
from firstlume.db.models_git import PullRequest
from firstlume.db.resource_states import ResourceState as StoredResourceState
from firstlume.db.resource_states import update_resource_states
from firstlume.db.types import utcnow
from firstlume.domain.changes import summarize
from firstlume.domain.errors import Conflict, FirstlumeError, InvalidRequest, NotFound, Unauthenticated
from firstlume.domain.git import ForkPolicy, head_ref
from firstlume.domain.policies import denial
from firstlume.domain.runs import (
    FINISHED_STEP_STATUSES,
    Phase,
    RunStatus,
    RunType,
    StepStatus,
    TriggerKind,
    is_running_phase,
    status_after_plan,
)
from firstlume.protocol.events import ChangesStored, LogAppended, ResourcesChanged, RunUpdated
from firstlume.protocol.executor import (
    CommitReport,
    ConfigurationReport,
    ConfigurationSource,
    DriftBase,
    FinishReport,
    GitCredentials,
    LogBatch,
    PhaseResult,
    PhaseSpec,
    PlanDownload,
    PlannedChange,
    PlanRecorded,
    PlanSummary,
    PlanUpload,
    ReportBatch,
    ResourceReports,
    StackSource,
    StateBackendsReport,
    StepReport,
    Variable,
)
from firstlume.pubsub import run_channel
from firstlume.services.access.approvers import policy_approval_rules, recorded_rules
from firstlume.services.cli import confirmation as cli_confirmation
from firstlume.services.context import Context, Unit
from firstlume.services.dependencies.inputs import DependencyInput, dependency_inputs
from firstlume.services.drift.baseline import drift_base
from firstlume.services.inherited import effective_settings, effective_variables
from firstlume.services.plan_changes import PlanChanges, output_changes
from firstlume.services.policies.evaluation import PlanEndPolicies
from firstlume.services.sealed_plan import plan_context, seal_plan_json
from firstlume.services.state.serials import record_planned_serials
from firstlume.services.steps import find_step, move_step
from firstlume.services.transitions import change_status

# A pub/sub message names changed resources only while it stays well under NOTIFY's 8000 bytes.
MAX_ADDRESSES_PER_EVENT = 50
# An apply's spec and its plan download both answer it for a run that has no plan to apply.
NO_STORED_PLAN = "This run has no stored plan."


class StepOutOfOrder(Conflict):
    code = "step_out_of_order"


class LogGap(Conflict):
    code = "log_gap"


class PlanMismatch(Conflict):
    code = "plan_mismatch"


def _phase_of_token(lock: bool) -> Select[Run, PhaseToken]:
    query = (
        select(Run, PhaseToken)
        .join(PhaseToken, PhaseToken.run_id == Run.id)
        .where(PhaseToken.token_hash == bindparam("token_hash"), PhaseToken.revoked_at.is_(None))
    )
    return query.with_for_update(of=Run) if lock else query


# Built once, and one statement: every request of an executor runs it, and building it (or a
# second round trip for the run) cost more than running it.
_PHASE_OF_TOKEN = {lock: _phase_of_token(lock) for lock in (False, True)}


async def authenticate_phase(
    session: AsyncSession, token: str | None, *, lock: bool = False
) -> tuple[Run, PhaseToken]:
    """The run and phase a live executor token is for; `lock` locks the run's row. PostgreSQL
    hands a locked row back as it is once the lock is had, so the phase is checked on that."""
    if not token:
        raise Unauthenticated("Send the executor's phase token: 'Authorization: Bearer <token>'.")
    found = (await session.execute(_PHASE_OF_TOKEN[lock], {"token_hash": hash_token(token)})).first()
    if found is None:
        raise Unauthenticated("This executor token is not valid, or its phase has ended.")
    run, row = found
    if not is_running_phase(run.status, run.phase_attempt, row.phase, row.attempt):
        raise Unauthenticated("This executor token is not valid, or its phase has ended.")
    return run, row


async def sensitive_allowed(session: AsyncSession, run: Run, stack: Stack) -> bool:
    """Whether the run gets the sensitive variables: all runs but a fork's proposed run, unless
    `pull_requests_from_forks` is "plan"."""
    if run.pull_request_id is None:
        return True
    pull = await session.get(PullRequest, run.pull_request_id)
    if pull is None or not pull.from_fork:
        return True
    policy = (await effective_settings(session, stack))["pull_requests_from_forks"].value
    return bool(policy == ForkPolicy.PLAN)


async def pull_request_head_ref(session: AsyncSession, pull_request_id: str | None) -> str | None:
    """Where the host keeps a proposed run's pull request head."""
    if pull_request_id is None:
        return None
    pull = await session.get(PullRequest, pull_request_id)
    return head_ref(pull.dialect, pull.number) if pull is not None else None


async def phase_spec(ctx: Context, session: AsyncSession, run: Run, token: PhaseToken) -> PhaseSpec:
    stack = await session.get(Stack, run.stack_id)
    assert stack is not None
    git_context = f"stack-git:{stack.id}"
    base: DriftBase | None = None
    if token.phase == Phase.PLAN:
        variables = [
            Variable.model_validate(
                {
                    "name": v.name,
                    "value": v.value,
                    "sensitive": v.sensitive,
                    "kind": v.kind,
                    "origin": v.origin,
                }
            )
            for v in await effective_variables(session, ctx.keyring, stack)
        ]
        if not await sensitive_allowed(session, run, stack):
            # A fork's pull request is anyone's code: no secrets unless the setting says so.
            variables = [v for v in variables if not v.sensitive]
        # A push run plans its pushed commit, a drift run what was last applied (NoDriftBase
        # when nothing was); any other plan takes the tip of the branch.
        commit_sha = run.trigger_commit
        if run.type == RunType.DRIFT:
            found = await drift_base(session, run, stack.slug)
            run.drift_base_run_id = found.run_id
            base = DriftBase(run_number=found.number, commit_sha=found.commit_sha)
            commit_sha = found.commit_sha
            variables = await _applied_variables(ctx, session, found.run_id, variables)
        else:
            # Read when the plan first starts (an attempt after it reads the same serials): the
            # plan stores them sealed, and its apply uses those.
            inputs, run.dependency_serials = await dependency_inputs(
                session, ctx.keyring, stack.id, run.dependency_serials
            )
            variables = with_dependency_inputs(variables, inputs)
    else:
        # The plan's variables only: its file and lock file are the plan download's.
        sealed = await session.scalar(
            select(PlanArtifact.variables_sealed).where(PlanArtifact.run_id == run.id)
        )
        if sealed is None:
            raise NotFound(NO_STORED_PLAN)
        variables = _stored_variables(ctx, run, sealed)
        commit_sha = run.commit_sha
    org = await session.get(Organization, stack.org_id)
    assert org is not None
    return PhaseSpec(
        run_id=run.id,
        phase=Phase(token.phase),
        attempt=token.attempt,
        run_type=RunType(run.type),
        stack=StackSource(slug=stack.slug, repository=stack.repository, branch=stack.branch, path=stack.path),
        git_auth=GitCredentials(
            https_token=ctx.keyring.decrypt_text(stack.git_https_token_sealed, git_context)
            if stack.git_https_token_sealed
            else None,
            ssh_private_key=ctx.keyring.decrypt_text(stack.git_ssh_key_sealed, git_context)
            if stack.git_ssh_key_sealed
            else None,
        ),
        commit_sha=commit_sha,
        proposed=run.proposed,
        commit_ref=await pull_request_head_ref(session, run.pull_request_id)
        if token.phase == Phase.PLAN
        else None,
        drift_base=base,
        variables=variables,
        log_offset=run.log_length,
        heartbeat_interval_seconds=ctx.settings.executor_heartbeat_interval,
        heartbeat_timeout_seconds=ctx.settings.heartbeat_timeout,
        git_timeout_seconds=ctx.settings.git_timeout,
        state_path=f"/api/v1/orgs/{org.slug}/stacks/{stack.slug}",
        source=ConfigurationSource(configuration_version=run.trigger_delivery)
        if run.trigger_kind == TriggerKind.CLI and run.trigger_delivery
        else None,
    )


async def _applied_variables(
    ctx: Context, session: AsyncSession, applied_run_id: str, current: list[Variable]
) -> list[Variable]:
    """The Terraform variables the applied run's plan used, with the current environment
    variables (credentials rotate; an old one would fail the drift run, not find drift). An apply
    whose plan is no longer stored leaves the current variables."""
    sealed = await session.scalar(
        select(PlanArtifact.variables_sealed).where(PlanArtifact.run_id == applied_run_id)
    )
    if sealed is None:
        return current
    applied = json.loads(ctx.keyring.decrypt_text(sealed, plan_context(applied_run_id, "variables")))
    terraform = [Variable.model_validate(v) for v in applied if v.get("kind", "terraform") == "terraform"]
    return terraform + [v for v in current if v.kind != "terraform"]


def with_dependency_inputs(variables: list[Variable], inputs: list[DependencyInput]) -> list[Variable]:
    """`variables` with the outputs read from upstream stacks, which win over a Terraform
    variable of the same name: the dependency names that variable explicitly."""
    if not inputs:
        return variables
    taken = {i.name for i in inputs}
    kept = [v for v in variables if v.kind != "terraform" or v.name not in taken]
    return kept + [
        Variable(name=i.name, value=i.value, sensitive=i.sensitive, kind="terraform", origin=i.origin)
        for i in inputs
    ]


def _stored_variables(ctx: Context, run: Run, variables_sealed: bytes) -> list[Variable]:
    stored = json.loads(ctx.keyring.decrypt_text(variables_sealed, plan_context(run.id, "variables")))
    return [Variable.model_validate(v) for v in stored]


# A Core statement on the table, built once: the ORM's bulk UPDATE path cost more than the rest
# of a heartbeat's request.
_HEARTBEAT = (
    cast(Table, Run.__table__)
    .update()
    .where(Run.__table__.c.id == bindparam("run_id"))
    .values(heartbeat_at=bindparam("now"))
)


async def heartbeat(session: AsyncSession, run: Run) -> None:
    await session.execute(_HEARTBEAT, {"run_id": run.id, "now": utcnow()})


async def record_commit(unit: Unit, run: Run, token: PhaseToken, report: CommitReport) -> None:
    if token.phase != Phase.PLAN:
        raise Conflict("The commit is recorded by the plan phase; an apply uses the plan's commit.")
    run.commit_sha = report.sha
    run.commit_author = report.author
    run.commit_message = report.message.splitlines()[0][:1000] if report.message else ""
    run.commit_url = report.url
    unit.publish_after_commit(run_channel(run.id), RunUpdated(run_id=run.id))


async def record_configuration(unit: Unit, run: Run, token: PhaseToken, report: ConfigurationReport) -> None:
    if token.phase != Phase.PLAN:
        return  # an apply runs with the configuration its plan recorded
    run.config_yaml = report.config_yaml
    run.engine = report.engine
    # Names and origins only: the model has no field for a value.
    run.variables_used = [v.model_dump(mode="json") for v in report.variables]
    unit.publish_after_commit(run_channel(run.id), RunUpdated(run_id=run.id))


async def record_step(unit: Unit, run: Run, report: StepReport) -> None:
    name, status = report.name, report.status
    step = await find_step(unit, run, name)
    current = StepStatus(step.status) if step else None
    if status == current:
        return  # a retried report
    if status == StepStatus.RUNNING and current in FINISHED_STEP_STATUSES:
        raise StepOutOfOrder(f"Step '{name}' has already ended ({current}); it cannot start again.")
    if status in (StepStatus.DONE, StepStatus.FAILED) and current != StepStatus.RUNNING:
        raise StepOutOfOrder(f"Step '{name}' is {current or 'not started'}; only a running step can end.")
    await move_step(unit, run, name, status, step)


async def append_log(unit: Unit, run: Run, batch: LogBatch) -> int:
    """Appends at the run log's end. A batch that starts before the end is a retry: the part
    already stored is skipped, so nothing is doubled. One that starts past the end is refused."""
    end = run.log_length
    if batch.offset > end:
        raise LogGap(
            f"The log ends at {end}; a batch at {batch.offset} would leave a gap.", expected_offset=end
        )
    new_text = batch.text[end - batch.offset :]
    if not new_text:
        return end
    unit.session.add(LogChunk(run_id=run.id, offset=end, step=batch.step, text=new_text))
    run.log_length = end + len(new_text)
    await unit.session.flush()
    unit.publish_after_commit(
        run_channel(run.id), LogAppended(run_id=run.id, step=batch.step, offset=end, end=run.log_length)
    )
    return run.log_length


async def record_state_backends(unit: Unit, run: Run, report: StateBackendsReport) -> None:
    run.state_backends = [b.model_dump(mode="json") for b in report.backends]
    unit.publish_after_commit(run_channel(run.id), RunUpdated(run_id=run.id))


async def record_reports(unit: Unit, run: Run, token: PhaseToken, batch: ReportBatch) -> None:
    """Each report as its own endpoint records it, in order. A refusal names the report and,
    raised out of the unit, undoes those before it: a batch is recorded whole or not at all."""
    for index, report in enumerate(batch.reports):
        try:
            if report.kind == "step":
                await record_step(unit, run, report)
            elif report.kind == "commit":
                await record_commit(unit, run, token, report)
            elif report.kind == "configuration":
                await record_configuration(unit, run, token, report)
            else:
                await record_state_backends(unit, run, report)
        except FirstlumeError as error:
            error.message = f"Report {index} ({report.kind}): {error.message}"
            error.args = (error.message,)
            error.details["report"] = index
            raise


async def store_plan(
    ctx: Context, unit: Unit, run: Run, token: PhaseToken, upload: PlanUpload
) -> PlanRecorded:
    if token.phase != Phase.PLAN:
        raise Conflict("Only the plan phase uploads a plan.")
    session = unit.session
    if await session.get(PlanArtifact, run.id) is not None:
        raise Conflict("This run already has a plan.")
    plan_file, plan_json, lock_file = upload.plan_file_b64, upload.plan_json, upload.lock_file
    variables = [v.model_dump(mode="json") for v in upload.variables]
    secrets = await _sensitive_values(ctx, session, run, upload)
    # The changes are worked out on a thread (services/plan_changes.py) while the plan is sealed
    # (services/sealed_plan.py: compressed outside the interpreter's lock) and written.
    computing = PlanChanges(run.id, plan_json, secrets)
    computing.start()
    try:
        keyring = ctx.keyring
        plan_json_sealed = await asyncio.to_thread(seal_plan_json, keyring, run.id, plan_json)
        session.add(
            PlanArtifact(
                run_id=run.id,
                plan_file_sealed=keyring.encrypt(plan_file, plan_context(run.id, "plan_file")),
                plan_json_sealed=plan_json_sealed,
                lock_file_sealed=keyring.encrypt_text(lock_file, plan_context(run.id, "lock_file"))
                if lock_file
                else None,
                variables_sealed=keyring.encrypt_text(
                    json.dumps(variables), plan_context(run.id, "variables")
                ),
                plan_sha256=hashlib.sha256(plan_file).hexdigest(),
            )
        )
        await session.flush()
    except BaseException:
        # The write failed: its error is the answer, once the thread is done.
        await computing.abandon()
        raise
    try:
        changes = await computing.write(session)
        outputs = output_changes(plan_json, secrets)
    except (AttributeError, KeyError, TypeError, ValueError) as error:  # a shape no plan has
        raise InvalidRequest(f"'plan_json' is not a Terraform plan: {error}.", field="plan_json") from None
    session.add_all(
        OutputChange(
            run_id=run.id,
            position=position,
            unit=change.unit,
            name=change.name,
            action=change.action,
            before=change.before,
            after=change.after,
            sensitive=change.sensitive,
        )
        for position, change in enumerate(outputs)
    )
    await record_planned_serials(session, run, plan_file)
    summary = summarize(changes, outputs=len(outputs))
    run.summary_delete, run.summary_replace = summary.delete, summary.replace
    run.summary_update, run.summary_create = summary.update, summary.create
    run.summary_outputs = summary.outputs
    run.has_plan = True
    await session.flush()
    unit.publish_after_commit(run_channel(run.id), ChangesStored(run_id=run.id))
    return PlanRecorded(
        summary=PlanSummary(**summary.as_dict(), outputs=summary.outputs), has_changes=summary.has_changes
    )


async def _sensitive_values(ctx: Context, session: AsyncSession, run: Run, upload: PlanUpload) -> list[Any]:
    """Every value that is sensitive in Firstlume: as the executor used them, and as the control
    plane holds them (it does not rely on the executor's word)."""
    values = [v.value for v in upload.variables if v.sensitive]
    stack = await session.get(Stack, run.stack_id)
    if stack is not None:
        values += [v.value for v in await effective_variables(session, ctx.keyring, stack) if v.sensitive]
    return values


async def _artifact(session: AsyncSession, run: Run) -> PlanArtifact:
    artifact = await session.get(PlanArtifact, run.id)
    if artifact is None:
        raise NotFound(NO_STORED_PLAN)
    return artifact


async def load_plan(ctx: Context, session: AsyncSession, run: Run, token: PhaseToken) -> PlanDownload:
    if token.phase != Phase.APPLY:
        raise Conflict("Only the apply phase downloads the plan.")
    artifact = await _artifact(session, run)
    keyring = ctx.keyring
    plan_file = keyring.decrypt(artifact.plan_file_sealed, plan_context(run.id, "plan_file"))
    if hashlib.sha256(plan_file).hexdigest() != artifact.plan_sha256:
        raise PlanMismatch("The stored plan file does not match its recorded hash.")
    return PlanDownload(
        plan_file_b64=plan_file,
        sha256=artifact.plan_sha256,
        lock_file=keyring.decrypt_text(artifact.lock_file_sealed, plan_context(run.id, "lock_file"))
        if artifact.lock_file_sealed
        else None,
        variables=_stored_variables(ctx, run, artifact.variables_sealed),
        config_yaml=run.config_yaml,
        commit_sha=run.commit_sha,
        changes=[
            PlannedChange(address=address, action=action, stage_order=[s["action"] for s in stages])
            for address, action, stages in await session.execute(
                select(ResourceChange.address, ResourceChange.action, ResourceChange.stages)
                .where(ResourceChange.run_id == run.id)
                .order_by(ResourceChange.position)
            )
        ],
    )


async def record_resources(unit: Unit, run: Run, token: PhaseToken, reports: ResourceReports) -> None:
    """One batch of resource states in one statement, whatever its size (the protocol bounds it)."""
    if token.phase != Phase.APPLY:
        raise Conflict("Resource states are reported by the apply phase.")
    changed = await update_resource_states(
        unit.session,
        run.id,
        (
            StoredResourceState(
                address=u.address,
                state=u.state.value,
                error=u.error,
                stages=[{"action": s.action, "state": s.state.value} for s in u.stages],
            )
            for u in reports.updates
        ),
    )
    if not changed:
        return
    addresses = tuple(changed) if len(changed) <= MAX_ADDRESSES_PER_EVENT else None
    unit.publish_after_commit(run_channel(run.id), ResourcesChanged(run_id=run.id, addresses=addresses))


async def fail_run(
    unit: Unit, run: Run, reason: str, *, actor: str | None = None, run_error: bool = True
) -> Run:
    """Ends a running phase as failed with `reason` as the run's error; with `run_error` False
    (resources failed, the run itself did not) the reason goes to the history only. The
    lifecycle's effects revoke its token, fail its running steps, mark resources that never
    started not_applied and count the failed ones."""
    error = reason if run_error else None
    return await change_status(unit, run, RunStatus.FAILED, actor=actor, reason=reason, error=error)


async def finish_phase(
    unit: Unit, run: Run, token: PhaseToken, report: FinishReport, policies: PlanEndPolicies | None = None
) -> Run:
    """`policies`: the run's policy checks, evaluated before this transaction began
    (services/phases.py); a deny fails the run here, before any approval."""
    session = unit.session
    # What the result carries is stored first: a step never ends before its text is in, nor an
    # apply before its resources' states (which a failure counts).
    if report.log is not None:
        await append_log(unit, run, report.log)
    if report.resources:
        await record_resources(unit, run, token, ResourceReports(updates=report.resources))
    if report.last_step is not None:
        # The phase's last step ends with it: one request fewer on every phase's critical path.
        ended = StepStatus.DONE if report.status == PhaseResult.SUCCEEDED else StepStatus.FAILED
        await record_step(unit, run, StepReport(name=report.last_step, status=ended))
    if report.status == PhaseResult.FAILED:
        if report.error is None and token.phase == Phase.APPLY:
            # Resources failed, the run did not: their errors are on the resources, and the run
            # counts them in failed_resources rather than in its error.
            failed, _ = await count_failed_resources(session, run.id, first=0)
            if failed:
                noun = "resource" if failed == 1 else "resources"
                return await fail_run(
                    unit, run, f"{failed} {noun} failed.", actor="executor", run_error=False
                )
        return await fail_run(
            unit, run, (report.error or "The executor reported a failure.")[:20_000], actor="executor"
        )
    if token.phase == Phase.APPLY:
        return await change_status(unit, run, RunStatus.APPLIED, actor="executor")
    if not run.has_plan:
        return await fail_run(unit, run, "The plan phase ended without uploading a plan.", actor="executor")
    run_type = RunType(run.type)
    has_changes = bool(
        run.summary_delete or run.summary_replace or run.summary_update or run.summary_create
    ) or bool(run.summary_outputs)
    recorded: dict[str, Any] = {}
    if policies is not None:
        run.policies, run.policies_origin = policies.names, policies.origin
        run.policy_checks = [check.as_dict() for check in policies.checks]
        denied = denial(policies.checks)
        if denied is not None:
            return await fail_run(unit, run, denied[:20_000], actor="policy")
    if run_type.intends_to_apply:
        # The approval rules are read now, when the plan finishes, and recorded with their origins.
        stack = await session.get(Stack, run.stack_id)
        assert stack is not None
        rules = await effective_settings(session, stack)
        # A CLI run's apply waits for the CLI's "yes"; -auto-approve gave it in advance.
        destructive = bool(run.summary_delete or run.summary_replace)
        required, origin = await cli_confirmation.approval_of_cli_run(
            session,
            run,
            required=bool(rules["require_approval"].value),
            origin=rules["require_approval"].origin,
            needs_more=bool(
                (rules["confirm_destructive"].value and destructive)
                or rules["approvers"].value
                or rules["forbid_self_approval"].value
            ),
        )
        recorded = {
            "approval_required": required,
            "approval_required_origin": origin,
            "confirm_destructive": bool(rules["confirm_destructive"].value),
            "confirm_destructive_origin": rules["confirm_destructive"].origin,
            **recorded_rules(rules),
        }
        if policies is not None:
            recorded.update(policy_approval_rules(policies.checks, recorded))
    target = status_after_plan(run_type, has_changes, bool(recorded.get("approval_required")))
    return await change_status(unit, run, target, actor="executor", **recorded)
