"""One phase of one run, from `GET /spec` to `POST /finish`.

Plan phase:  checkout (tip of the branch; a push run's commit; a drift run's last applied commit)
             → init → plan (upload the plan) → finish.
Apply phase: one `apply` step: verify the plan file's SHA-256, check out the plan's commit, init
             with the plan's lock file, apply the saved plan file (per-resource states) → finish.

Every failure becomes a failed step and `POST /finish` failed with a masked error text. A 401
from the control plane means the phase is over for it: the executor stops without reporting.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sys
import traceback
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firstlume.domain.apply_events import FAILED, ApplyTracker, ResourceUpdate
from firstlume.domain.runs import APPLY_STEP, Phase, RunType, StepStatus
from firstlume.domain.tarballs import UnsafeTarball, extract_tarball
from firstlume.executor.checkout import (
    OVERALL_FACTOR,
    CheckoutError,
    Commit,
    GitAuth,
    checkout,
    display_url,
)
from firstlume.executor.client import (
    ControlPlaneError,
    ExecutorClient,
    LogGap,
    StorageRefusal,
    Unauthorized,
)
from firstlume.executor.config_file import ConfigError, StackConfig, load_config
from firstlume.executor.engines import Engine, EngineError, make_engine
from firstlume.executor.engines.base import engine_environment, write_var_file
from firstlume.executor.engines.messages import readable_message
from firstlume.executor.heartbeat import Heartbeat
from firstlume.executor.logs import LogShipper, LogText, Masker, secret_strings
from firstlume.executor.managed_state import (
    MANAGED_BACKEND,
    ManagedUnit,
    credentials_environment,
    write_overrides,
)
from firstlume.executor.reports import OrderedReports
from firstlume.executor.resources import ResourceShipper
from firstlume.protocol.executor import (
    CommitEntry,
    ConfigurationEntry,
    ConfigurationSource,
    FinishAnswer,
    LogBatch,
    PhaseResult,
    PhaseSpec,
    PlanDownload,
    PlanUpload,
    ResourceReport,
    StateBackend,
    StateBackendsEntry,
    StepEntry,
    Variable,
    VariableUse,
)
from firstlume.tasks import cancel_and_wait

CONFIG_ORIGIN = "config.yaml"
# How often buffered log text and resource states go out while the engine runs.
SHIP_INTERVAL_SECONDS = 0.1
MAX_ERROR_CHARS = 8000
_UNAUTHORIZED = "the control plane refused the phase token"


# Set by the launcher beside the token: which phase the executor is for.
PHASE_VAR = "FIRSTLUME_PHASE"


class PhaseFailure(Exception):
    """An expected failure; its message becomes the run's error. `logged` when the log already
    shows it (Terraform printed it), so that it is not printed twice."""

    def __init__(self, message: str, *, logged: bool = False) -> None:
        super().__init__(message)
        self.logged = logged


class ResourcesFailed(PhaseFailure):
    """Only resources failed: their errors are on them (and in the log); the run has no error of
    its own, and the control plane counts them in failed_resources."""

    NAMED = 20

    def __init__(self, addresses: list[str]) -> None:
        noun = "resource" if len(addresses) == 1 else "resources"
        named = ", ".join(addresses[: self.NAMED])
        more = f" and {len(addresses) - self.NAMED} more" if len(addresses) > self.NAMED else ""
        super().__init__(f"{len(addresses)} {noun} failed: {named}{more}", logged=True)
        self.addresses = addresses


async def _drop(task: asyncio.Task[Commit]) -> None:
    """Ends a clone the phase no longer waits for (it failed first). Its thread finishes on its
    own, and the executor waits for that before it exits; its failure, if any, is not the phase's."""
    if not task.done():
        task.cancel()
    await asyncio.wait([task])
    if not task.cancelled():
        task.exception()


@dataclass(frozen=True)
class PhaseOutcome:
    status: PhaseResult | None  # what was reported, or None when nothing was
    error: str | None
    run_status: str | None  # the run's status the control plane answered
    exit_code: int  # 0 succeeded, 1 failed and reported, 2 could not report


def merge_variables(spec_variables: Iterable[Variable], config: StackConfig) -> list[Variable]:
    """config.yaml variables are the outermost level: any spec variable of the same name wins."""
    given = list(spec_variables)
    names = {v.name for v in given}
    merged = [
        Variable(name=name, value=value, sensitive=False, kind="terraform", origin=CONFIG_ORIGIN)
        for name, value in config.variables.items()
        if name not in names
    ]
    return merged + given


def storage_stop_reason(refusal: StorageRefusal, patience: float) -> str:
    """A phase stopped because the control plane could not store its reports."""
    return (
        f"{refusal.prefix}: the control plane could not store this phase's reports for {patience:g} "
        f"seconds, so the phase was stopped. {refusal.message}"
    )


def apply_failure(
    run_errors: list[str], failed: list[str], exit_code: int, binary: str
) -> PhaseFailure | None:
    """Why an apply failed: errors of the run's own first (Terraform printed them), then failed
    resources, then a bare exit code."""
    if run_errors:
        return PhaseFailure("\n\n".join(run_errors), logged=True)
    if failed:
        return ResourcesFailed(failed)
    if exit_code != 0:
        return PhaseFailure(f"{binary} apply failed (exit code {exit_code})")
    return None


class PhaseRunner:
    def __init__(
        self,
        client: ExecutorClient,
        work_dir: Path,
        *,
        base_env: Mapping[str, str],
        ship_interval: float = SHIP_INTERVAL_SECONDS,
    ) -> None:
        self.client = client
        self.work_dir = work_dir
        self.base_env = dict(base_env)
        self.ship_interval = ship_interval
        self.masker = Masker()
        self.logs = LogShipper(client, offset=0, masker=self.masker, interval=ship_interval)
        self.reports = OrderedReports(client, before_step_end=self._quiet_flush)
        self._step_name = "checkout"
        self._body: asyncio.Task[None] | None = None
        self._stop_reason: str | None = None
        # The phase's last step, once it has ended well: its end goes with the result.
        self._ended_with_phase: str | None = None
        # An apply's plan, asked for while the spec is read.
        self._plan: asyncio.Future[PlanDownload] | None = None
        # Units whose state this phase keeps in Firstlume, and the override files written for them.
        self._managed_units: set[str] = set()
        self._overrides: list[Path] = []
        # An apply's last resource states, not yet shipped: its result carries them.
        self._last_resources: list[ResourceReport] = []
        # How long the control plane may refuse to store this phase's reports before it stops
        # (the spec's heartbeat timeout; None: it goes on).
        self._storage_patience: float | None = None

    def terminate(self, reason: str) -> None:
        """Stops the phase (a dead token, SIGTERM); the engine gets an interrupt first."""
        if self._stop_reason is None:
            self._stop_reason = reason
        if self._body is not None and not self._body.done():
            self._body.cancel()

    async def run(self) -> PhaseOutcome:
        # An apply asks for its plan alongside its spec (the launcher names the phase): the plan
        # is on the phase's critical path, and the two answers do not depend on each other.
        if self.base_env.get(PHASE_VAR) == Phase.APPLY:
            self._plan = asyncio.ensure_future(self.client.get_plan())
        try:
            spec = await self.client.get_spec()
        except Unauthorized:
            await self._drop_plan()
            return PhaseOutcome(None, _UNAUTHORIZED, None, 2)
        except ControlPlaneError as exc:
            await self._drop_plan()
            return await self._finish(PhaseResult.FAILED, f"the executor could not read its spec: {exc}")
        if spec.phase != Phase.APPLY:
            await self._drop_plan()

        for variable in spec.variables:
            self._add_secret_variable(variable)
        for secret in (spec.git_auth.https_token, spec.git_auth.ssh_private_key):
            if secret:
                self.masker.add(secret)
        self.logs = LogShipper(
            self.client, offset=spec.log_offset, masker=self.masker, interval=self.ship_interval
        )
        heartbeat = Heartbeat(
            self.client,
            spec.heartbeat_interval_seconds,
            on_unauthorized=lambda: self.terminate(_UNAUTHORIZED),
        )
        await self.logs.start()
        await heartbeat.start()
        self._storage_patience = spec.heartbeat_timeout_seconds
        storage_watch = (
            asyncio.create_task(self._watch_storage(spec.heartbeat_interval_seconds), name="storage-watch")
            if self._storage_patience is not None
            else None
        )
        status = PhaseResult.SUCCEEDED
        error: str | None = None
        body = self._plan_phase if spec.phase == Phase.PLAN else self._apply_phase
        self._body = asyncio.create_task(body(spec), name="phase")
        try:
            await self._body
        except asyncio.CancelledError:
            if self._stop_reason is None or self._stop_reason == _UNAUTHORIZED:
                await self._abandon(heartbeat)
                if self._stop_reason is None:
                    raise
                return PhaseOutcome(None, _UNAUTHORIZED, None, 2)
            status, error = PhaseResult.FAILED, self._stop_reason
        except Unauthorized:
            await self._abandon(heartbeat)
            return PhaseOutcome(None, _UNAUTHORIZED, None, 2)
        except ResourcesFailed:
            status, error = PhaseResult.FAILED, None
        except Exception as exc:
            status, error = PhaseResult.FAILED, self._describe(exc)
        finally:
            await cancel_and_wait(storage_watch)
            self._remove_overrides()
            await self._drop_plan()
            await heartbeat.stop()
        try:
            await self.reports.stop()
        except Unauthorized:
            await self._abandon(heartbeat)
            return PhaseOutcome(None, _UNAUTHORIZED, None, 2)
        except ControlPlaneError as exc:
            if status == PhaseResult.SUCCEEDED:
                status, error = PhaseResult.FAILED, self._describe(exc)
        tail: LogText | None = None
        try:
            tail = await self.logs.stop_with_tail()
        except Unauthorized:
            return PhaseOutcome(None, _UNAUTHORIZED, None, 2)
        except ControlPlaneError as exc:
            print(f"firstlume executor: could not ship the whole log: {exc}", file=sys.stderr)
        return await self._finish(status, error, tail)

    async def _watch_storage(self, interval: float) -> None:
        """Stops the phase once the control plane has refused to store one of its reports (a log
        batch, a step, a heartbeat) for `_storage_patience` seconds (the heartbeat timeout): what
        the phase does meanwhile cannot be recorded. Its result then says so first."""
        patience = self._storage_patience
        assert patience is not None
        while True:
            await asyncio.sleep(interval)
            refusal = self.client.storage_refusal()
            if refusal is not None and self.client.refused_for(refusal) >= patience:
                self.terminate(storage_stop_reason(refusal, patience))
                return

    # -- phases ---------------------------------------------------------------------------------

    async def _plan_phase(self, spec: PhaseSpec) -> None:
        async with self._step("checkout"):
            if spec.source is not None:
                code_dir = await self._unpack(spec.source)
            else:
                code_dir = await self._plan_checkout(spec)
            config = load_config(code_dir)
            variables = merge_variables(spec.variables, config)
            public = [
                VariableUse(name=v.name, origin=v.origin, sensitive=v.sensitive, kind=v.kind)
                for v in variables
            ]
            self.reports.send(
                ConfigurationEntry.model_validate(
                    {
                        "kind": "configuration",
                        "config_yaml": config.text,
                        "engine": config.engine,
                        "variables": public,
                    }
                )
            )
            self._log(f"Engine: {config.engine}")
            for v in public:
                self._log(f"Variable {v.name} ({v.kind}) from {v.origin}")

        engine = self._engine(config, code_dir, variables)
        async with self._step("init"):
            self._manage_state(spec, engine)
            await engine.init()
            self.reports.send(self._state_backends(engine))
        await self._plan_step(spec, engine, variables)

    async def _unpack(self, source: ConfigurationSource) -> Path:
        """A CLI run's code: its uploaded configuration, unpacked safely (no path out of the
        directory, no link out, within the size and file limits)."""
        self._log(
            f"Unpacking configuration version {source.configuration_version} (uploaded by the Terraform CLI)"
        )
        archive = await self.client.get_configuration()
        dest = self.work_dir / "checkout"
        if dest.exists():
            await asyncio.to_thread(shutil.rmtree, dest)
        dest.mkdir(parents=True)
        try:
            summary = await asyncio.to_thread(extract_tarball, archive, dest)
        except UnsafeTarball as error:
            raise PhaseFailure(str(error)) from None
        self._log(f"Unpacked {summary.files} entries")
        return dest

    async def _plan_checkout(self, spec: PhaseSpec) -> Path:
        stack = spec.stack
        branch = stack.branch or "main"
        if spec.drift_base is not None:
            base = spec.drift_base
            self._log(
                f"Drift check: planning commit {base.commit_sha}, the one the stack's last "
                f"successful apply (run #{base.run_number}) applied, not the tip of {branch}"
            )
        if spec.commit_sha:
            # A push run plans the commit that was pushed, not whatever the tip is now; a
            # drift run the commit that was applied.
            self._log(f"Cloning {display_url(stack.repository)} at commit {spec.commit_sha}")
            commit = await self._checkout(spec, sha=spec.commit_sha)
        else:
            self._log(f"Cloning {display_url(stack.repository)} at the tip of {branch}")
            commit = await self._checkout(spec, branch=branch)
        self.reports.send(
            CommitEntry(
                kind="commit",
                sha=commit.sha,
                author=commit.author,
                message=commit.message,
                url=commit.url,
            )
        )
        return self._code_dir(stack.path, commit)

    async def _plan_step(self, spec: PhaseSpec, engine: Engine, variables: list[Variable]) -> None:
        async with self._step("plan", last=True):
            terraform_values = {v.name: v.value for v in variables if v.kind == "terraform"}
            var_file = write_var_file(self.work_dir, terraform_values)
            plan_file = self.work_dir / "plan.tfplan"
            try:
                has_changes = await engine.plan(
                    plan_file,
                    var_file=var_file,
                    destroy=spec.run_type == RunType.DESTROY,
                    lock=not spec.proposed,
                )
            finally:
                var_file.unlink(missing_ok=True)
            upload = PlanUpload(
                plan_file_b64=plan_file.read_bytes(),
                plan_json=await engine.show_json(plan_file),
                lock_file=engine.lock_file(),
                variables=variables,
            )
            answer = await self.client.upload_plan(upload)
            summary = answer.summary.model_dump() if answer.summary else {}
            names = {"outputs": "output changes"}
            counts = ", ".join(f"{count} {names.get(name, name)}" for name, count in summary.items() if count)
            recorded = answer.has_changes
            changes = "changes" if (has_changes if recorded is None else recorded) else "no changes"
            self._log(f"Plan recorded: {changes}" + (f" ({counts})" if counts else ""))

    async def _apply_phase(self, spec: PhaseSpec) -> None:
        # A run has one step per name, and the control plane refuses to start a finished step
        # again: checkout and init already ran in the plan phase. The apply phase is one step,
        # `apply`, whose log has the checkout, init and apply parts under their own headings.
        async with self._step(APPLY_STEP, heading=False, last=True):
            self._heading("checkout")
            if spec.source is not None:
                plan = await (self._plan or self.client.get_plan())
                for variable in plan.variables:
                    self._add_secret_variable(variable)
                plan_bytes = self._verified_plan_file(plan)
                self._log(f"Plan file verified (SHA-256 {plan.sha256})")
                code_dir = await self._unpack(spec.source)
            else:
                code_dir, plan, plan_bytes = await self._apply_checkout(spec)
            config = load_config(code_dir)

            self._heading("init")
            engine = self._engine(config, code_dir, plan.variables)
            engine.restore_lock_file(plan.lock_file)
            self._manage_state(spec, engine)
            await engine.init(lockfile_readonly=plan.lock_file is not None)
            self.reports.send(self._state_backends(engine))

            self._heading("apply")
            plan_file = self.work_dir / "plan.tfplan"
            plan_file.write_bytes(plan_bytes)
            # The control plane lists the plan's changes: no `show -json` of the plan again.
            tracker = ApplyTracker((c.address, c.action, tuple(c.stage_order)) for c in plan.changes)
            failure = await self._apply(engine, plan_file, tracker)
            if failure is not None:
                raise failure

    async def _apply_checkout(self, spec: PhaseSpec) -> tuple[Path, PlanDownload, bytes]:
        stack = spec.stack
        # The spec names the plan's commit: it is cloned while the plan downloads, and used
        # only once the plan is verified and made at that commit.
        cloning = asyncio.create_task(self._clone(spec, sha=spec.commit_sha)) if spec.commit_sha else None
        try:
            plan = await (self._plan or self.client.get_plan())
            for variable in plan.variables:
                self._add_secret_variable(variable)
            plan_bytes = self._verified_plan_file(plan)
            sha = spec.commit_sha or plan.commit_sha
            planned_at, named = plan.commit_sha, spec.commit_sha
            if planned_at and named and planned_at != named:
                raise PhaseFailure(f"the plan was made at commit {planned_at} but the spec names {named}")
            if not sha:
                raise PhaseFailure("the control plane gave no commit to apply")
            self._log(f"Plan file verified (SHA-256 {plan.sha256})")
            self._log(f"Cloning {display_url(stack.repository)} at commit {sha}")
            commit = await (cloning if cloning is not None else self._clone(spec, sha=sha))
        finally:
            if cloning is not None:
                await _drop(cloning)
        self._log_commit(commit)
        return self._code_dir(stack.path, commit), plan, plan_bytes

    async def _apply(self, engine: Engine, plan_file: Path, tracker: ApplyTracker) -> PhaseFailure | None:
        """Runs the apply; resource states go out in the background, never holding up the
        engine's output, and all of them are delivered before this returns."""
        shipper = ResourceShipper(self.client, interval=self.ship_interval)
        latest: dict[str, ResourceUpdate] = {}

        def record(updates: list[ResourceUpdate]) -> None:
            for update in updates:
                latest[update.address] = update
                shipper.add(self._report(update))

        def on_message(message: dict[str, Any]) -> None:
            text = readable_message(message)
            if text:
                self._log(text)
            record(tracker.feed(message))

        await shipper.start()
        try:
            exit_code = await engine.apply(plan_file, on_message)
            record(tracker.finish())
        except BaseException:
            with suppress(ControlPlaneError):
                await shipper.stop()  # what is known so far still reaches the control plane
            raise
        # The last states go with the phase's result: one round trip fewer at the apply's end.
        self._last_resources = await shipper.stop_with_rest()
        failed = [address for address, u in latest.items() if u.state == FAILED]
        failure = apply_failure(tracker.run_errors, failed, exit_code, engine.binary)
        if isinstance(failure, ResourcesFailed):
            self._log(f"Apply failed: {failure}")
        return failure

    # -- pieces ---------------------------------------------------------------------------------

    @asynccontextmanager
    async def _step(self, name: str, *, heading: bool = True, last: bool = False) -> AsyncIterator[None]:
        """A step's start and end are reported in the background, in order; its end only once
        the log it wrote is shipped, so a finished step always shows its whole log. The `last`
        step's end, when it ends well, is reported with the phase's result: the result waits for
        every report and the log anyway, and one round trip fewer ends the phase sooner."""
        self.reports.send(StepEntry(kind="step", name=name, status=StepStatus.RUNNING))
        self._step_name = name
        if heading:
            self._heading(name)
        try:
            yield
        except Unauthorized:
            raise
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) and self._stop_reason in (None, _UNAUTHORIZED):
                raise
            if isinstance(exc, asyncio.CancelledError):
                self._log(f"Error: {self._stop_reason}")
            elif not (isinstance(exc, PhaseFailure) and exc.logged):
                self._log(f"Error: {self._describe(exc)}")
            self.reports.send(StepEntry(kind="step", name=name, status=StepStatus.FAILED))
            raise
        if last:
            self._ended_with_phase = name
        else:
            self.reports.send(StepEntry(kind="step", name=name, status=StepStatus.DONE))

    async def _drop_plan(self) -> None:
        """The plan asked for ahead is not needed: its request ends, and so does any error of it."""
        if self._plan is not None:
            self._plan.cancel()
            await asyncio.gather(self._plan, return_exceptions=True)
            self._plan = None

    def _heading(self, part: str) -> None:
        """Both phases mark each part of their log the same way."""
        self._log(f"--- {part}")

    def _log(self, text: str) -> None:
        self.logs.line(self._step_name, text)

    async def _quiet_flush(self) -> None:
        try:
            await self.logs.flush()
        except Unauthorized:
            raise
        except ControlPlaneError:
            pass  # kept; the final flush tries again

    async def _checkout(
        self, spec: PhaseSpec, *, branch: str | None = None, sha: str | None = None
    ) -> Commit:
        commit = await self._clone(spec, branch=branch, sha=sha)
        self._log_commit(commit)
        return commit

    def _log_commit(self, commit: Commit) -> None:
        self._log(f"Checked out {commit.sha}: {commit.message} ({commit.author})")

    async def _clone(self, spec: PhaseSpec, *, branch: str | None = None, sha: str | None = None) -> Commit:
        auth = GitAuth(spec.git_auth.https_token, spec.git_auth.ssh_private_key)
        dest = self.work_dir / "checkout"
        if dest.exists():
            await asyncio.to_thread(shutil.rmtree, dest)
        timeout = spec.git_timeout_seconds
        # libgit2 stops each silent wait itself; this bounds the whole, should a transport not.
        limit = OVERALL_FACTOR * timeout + timeout
        try:
            commit = await asyncio.wait_for(
                asyncio.to_thread(
                    checkout,
                    spec.stack.repository,
                    dest,
                    branch=branch,
                    sha=sha,
                    auth=auth,
                    timeout=timeout,
                    commit_ref=spec.commit_ref if sha == spec.commit_sha else None,
                ),
                limit,
            )
        except TimeoutError:
            raise PhaseFailure(
                f"checkout of {display_url(spec.stack.repository)} took longer than {limit:g} seconds "
                "(FIRSTLUME_GIT_TIMEOUT)"
            ) from None
        return commit

    def _code_dir(self, path: str | None, commit: Commit) -> Path:
        root = (self.work_dir / "checkout").resolve()
        code_dir = (root / (path or ".").strip("/")).resolve()
        if not code_dir.is_relative_to(root) or ".git" in code_dir.relative_to(root).parts:
            raise PhaseFailure(f"the stack path {path!r} is outside the repository")
        if not code_dir.is_dir():
            raise PhaseFailure(f"the stack path {path!r} does not exist in commit {commit.sha}")
        return code_dir

    def _engine(self, config: StackConfig, code_dir: Path, variables: Iterable[Variable]) -> Engine:
        extra = dict(config.environment)
        for variable in variables:
            if variable.kind == "env":
                value = variable.value
                extra[variable.name] = value if isinstance(value, str) else json.dumps(value)
        env = engine_environment(self.base_env, self.work_dir, extra)
        return make_engine(config.engine, code_dir=code_dir, work_dir=self.work_dir, env=env, log=self._log)

    def _manage_state(self, spec: PhaseSpec, engine: Engine) -> None:
        """Points the units that declare no backend at the control plane's managed state, with
        this phase's token (in the engine's environment, never in a file or the log)."""
        if spec.state_path is None:
            return
        # The CLI's code has a `cloud` block: the override's backend replaces it, so that the run
        # keeps the workspace's state in Firstlume, where the CLI reads it.
        units = [ManagedUnit(".", engine.code_dir)] if spec.source is not None else engine.managed_units()
        if not units:
            return
        self._overrides += write_overrides(units, self.client.base_url, spec.state_path)
        self._managed_units = {unit.unit for unit in units}
        self.masker.add(self.client.token)
        engine.env.update(credentials_environment(self.client.token))
        names = ", ".join(sorted(self._managed_units))
        why = (
            "the code's cloud block names Firstlume"
            if spec.source is not None
            else f"no backend in the code: {names}"
        )
        self._log(f"State: kept in Firstlume, locked in this run's name ({why})")

    def _state_backends(self, engine: Engine) -> StateBackendsEntry:
        backends = [
            StateBackend(unit=b.unit, backend=MANAGED_BACKEND) if b.unit in self._managed_units else b
            for b in engine.state_backends()
        ]
        return StateBackendsEntry(kind="state_backends", backends=backends)

    def _remove_overrides(self) -> None:
        for path in self._overrides:
            path.unlink(missing_ok=True)
        self._overrides = []

    def _verified_plan_file(self, plan: PlanDownload) -> bytes:
        data = plan.plan_file_b64
        digest = hashlib.sha256(data).hexdigest()
        expected = plan.sha256.lower()
        if digest != expected:
            raise PhaseFailure(
                f"the plan file's SHA-256 is {digest}, not the recorded {expected}: "
                "it was altered or corrupted, so it is not applied; plan again"
            )
        return data

    def _report(self, update: ResourceUpdate) -> ResourceReport:
        error = self.masker.mask(update.error) if update.error is not None else None
        return ResourceReport.model_validate(
            {
                "address": update.address,
                "state": update.state,
                "error": error[:MAX_ERROR_CHARS] if error is not None else None,
                "stages": [{"action": s.action, "state": s.state} for s in update.stages],
            }
        )

    def _add_secret_variable(self, variable: Variable) -> None:
        if variable.sensitive:
            for secret in secret_strings(variable.value):
                self.masker.add(secret)

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, PhaseFailure | ConfigError | CheckoutError | EngineError | ControlPlaneError):
            text = str(exc)
        else:
            # Unexpected: the type helps whoever reads the error; the traceback goes to stderr,
            # masked, never to the run.
            text = f"the executor failed unexpectedly: {type(exc).__name__}: {exc}"
            trace = "".join(traceback.format_exception(exc))
            print(self.masker.mask(trace), file=sys.stderr)
        text = self.masker.mask(text)
        return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "…"

    async def _abandon(self, heartbeat: Heartbeat) -> None:
        await heartbeat.stop()
        await self.reports.abandon()
        try:
            await self.logs.stop()
        except ControlPlaneError:
            pass

    async def _finish(
        self, status: PhaseResult, error: str | None, tail: LogText | None = None
    ) -> PhaseOutcome:
        """Reports the result, with what is left to ship when it can carry it: the log's last
        text (`tail`) and an apply's last resource states."""
        error = self.masker.mask(error) if error is not None else None
        # Only a success names the last step: a failure ends every running step failed anyway,
        # and a step whose start was never delivered cannot be ended.
        last_step = self._ended_with_phase if status == PhaseResult.SUCCEEDED else None
        resources, self._last_resources = self._last_resources, []
        log = LogBatch(offset=tail.offset, step=tail.step, text=tail.text) if tail is not None else None
        try:
            try:
                answer = await self.client.finish(
                    status,
                    error,
                    last_step=last_step,
                    log=log,
                    resources=resources,
                    storage_patience=self._storage_patience,
                )
            except LogGap:
                if log is None:
                    raise
                # The control plane's log does not end where this text starts (it lost some):
                # nothing was recorded; the shipper repairs the gap, then the result goes without it.
                await self._quiet_flush()
                tail = None
                answer = await self.client.finish(status, error, last_step=last_step, resources=resources)
            except ControlPlaneError:
                # The result was refused or did not arrive, and what it carried with it: that
                # still goes on its own, as it did before the result. Each on its own: a log that
                # cannot be delivered does not keep the resource states from the control plane.
                with suppress(ControlPlaneError):
                    await self.logs.flush()
                if resources:
                    with suppress(ControlPlaneError):
                        await self.client.report_resources(resources)
                raise
        except ControlPlaneError as exc:
            print(f"firstlume executor: could not report the result ({status}): {exc}", file=sys.stderr)
            return PhaseOutcome(None, error, None, 2)
        if tail is not None:
            self.logs.delivered(tail)
        return self._outcome(status, error, answer)

    @staticmethod
    def _outcome(status: PhaseResult, error: str | None, answer: FinishAnswer) -> PhaseOutcome:
        return PhaseOutcome(status, error, answer.status, 0 if status == PhaseResult.SUCCEEDED else 1)
