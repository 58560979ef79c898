"""One phase of one run, from `GET /spec` to `POST /finish`.

Plan phase:  checkout (tip of the branch) → init → plan (upload the plan) → finish.
Apply phase: one `apply` step: verify the plan file's SHA-256, check out the plan's commit, init
             with the plan's lock file, apply the saved plan file (per-resource states) → finish.

Every failure becomes a failed step and `POST /finish` failed with a masked error text. A 401
from the control plane means the phase is over for it: the executor stops without reporting.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import shutil
import sys
import traceback
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firstlume.domain.apply_events import ApplyTracker, ResourceUpdate
from firstlume.domain.changes import changes_from_plan
from firstlume.executor.checkout import CheckoutError, Commit, GitAuth, checkout, display_url
from firstlume.executor.client import ControlPlaneError, ExecutorClient, Unauthorized
from firstlume.executor.config_file import ConfigError, StackConfig, load_config
from firstlume.executor.engine import (
    Engine,
    EngineError,
    encode_plan_file,
    engine_environment,
    readable_message,
    write_var_file,
)
from firstlume.executor.heartbeat import Heartbeat
from firstlume.executor.logs import LogShipper, Masker, secret_strings

CONFIG_ORIGIN = "config.yaml"
APPLY_STEP = "apply"
DEFAULT_HEARTBEAT_SECONDS = 10.0
MAX_ERROR_CHARS = 8000
_UNAUTHORIZED = "the control plane refused the phase token"


class PhaseFailure(Exception):
    """An expected failure; its message becomes the run's error."""


@dataclass(frozen=True)
class PhaseOutcome:
    status: str | None  # what was reported: "succeeded", "failed", or None when nothing was
    error: str | None
    run_status: str | None  # the run's status the control plane answered
    exit_code: int  # 0 succeeded, 1 failed and reported, 2 could not report


def merge_variables(spec_variables: list[dict[str, Any]], config: StackConfig) -> list[dict[str, Any]]:
    """config.yaml variables are the outermost level: any spec variable of the same name wins."""
    names = {v["name"] for v in spec_variables}
    merged = [
        {"name": name, "value": value, "sensitive": False, "kind": "terraform", "origin": CONFIG_ORIGIN}
        for name, value in config.variables.items()
        if name not in names
    ]
    return merged + [dict(v) for v in spec_variables]


def apply_error(run_errors: list[str], failed: list[str], exit_code: int, binary: str) -> str | None:
    if run_errors:
        return "\n\n".join(run_errors)
    if failed:
        noun = "resource" if len(failed) == 1 else "resources"
        return f"{len(failed)} {noun} failed: {', '.join(failed)}"
    if exit_code != 0:
        return f"{binary} apply failed (exit code {exit_code})"
    return None


class PhaseRunner:
    def __init__(
        self,
        client: ExecutorClient,
        work_dir: Path,
        *,
        base_env: Mapping[str, str],
        log_interval: float = 1.0,
    ) -> None:
        self.client = client
        self.work_dir = work_dir
        self.base_env = dict(base_env)
        self.log_interval = log_interval
        self.masker = Masker()
        self.logs = LogShipper(client, offset=0, masker=self.masker, interval=log_interval)
        self._step_name = "checkout"
        self._body: asyncio.Task[None] | None = None
        self._stop_reason: str | None = None

    def terminate(self, reason: str) -> None:
        """Stops the phase (a dead token, SIGTERM); the engine gets an interrupt first."""
        if self._stop_reason is None:
            self._stop_reason = reason
        if self._body is not None and not self._body.done():
            self._body.cancel()

    async def run(self) -> PhaseOutcome:
        try:
            spec = await self.client.get_spec()
        except Unauthorized:
            return PhaseOutcome(None, _UNAUTHORIZED, None, 2)
        except ControlPlaneError as exc:
            return await self._finish("failed", f"the executor could not read its spec: {exc}")

        for variable in spec.get("variables") or []:
            self._add_secret_variable(variable)
        git_auth = spec.get("git_auth") or {}
        for secret in (git_auth.get("https_token"), git_auth.get("ssh_private_key")):
            if secret:
                self.masker.add(secret)
        self.logs = LogShipper(
            self.client,
            offset=int(spec.get("log_offset") or 0),
            masker=self.masker,
            interval=self.log_interval,
        )
        heartbeat = Heartbeat(
            self.client,
            float(spec.get("heartbeat_interval_seconds") or DEFAULT_HEARTBEAT_SECONDS),
            on_unauthorized=lambda: self.terminate(_UNAUTHORIZED),
        )
        await self.logs.start()
        await heartbeat.start()
        status, error = "succeeded", None
        body = self._plan_phase if spec.get("phase") == "plan" else self._apply_phase
        self._body = asyncio.create_task(body(spec), name="phase")
        try:
            await self._body
        except asyncio.CancelledError:
            if self._stop_reason is None or self._stop_reason == _UNAUTHORIZED:
                await self._abandon(heartbeat)
                if self._stop_reason is None:
                    raise
                return PhaseOutcome(None, _UNAUTHORIZED, None, 2)
            status, error = "failed", self._stop_reason
        except Unauthorized:
            await self._abandon(heartbeat)
            return PhaseOutcome(None, _UNAUTHORIZED, None, 2)
        except Exception as exc:
            status, error = "failed", self._describe(exc)
        finally:
            await heartbeat.stop()
        try:
            await self.logs.stop()
        except Unauthorized:
            return PhaseOutcome(None, _UNAUTHORIZED, None, 2)
        except ControlPlaneError as exc:
            print(f"firstlume executor: could not ship the whole log: {exc}", file=sys.stderr)
        return await self._finish(status, error)

    # -- phases ---------------------------------------------------------------------------------

    async def _plan_phase(self, spec: dict[str, Any]) -> None:
        stack = spec["stack"]
        async with self._step("checkout"):
            branch = stack.get("branch") or "main"
            self._log(f"Cloning {display_url(stack['repository'])} at the tip of {branch}")
            commit = await self._checkout(spec, branch=branch)
            await self.client.report_commit(commit.sha, commit.author, commit.message, commit.url)
            code_dir = self._code_dir(stack.get("path"), commit)
            config = load_config(code_dir)
            variables = merge_variables(list(spec.get("variables") or []), config)
            public = [{k: v[k] for k in ("name", "origin", "sensitive", "kind")} for v in variables]
            await self.client.report_configuration(config.text, config.engine, public)
            self._log(f"Engine: {config.engine}")
            for v in public:
                self._log(f"Variable {v['name']} ({v['kind']}) from {v['origin']}")

        engine = self._engine(config, code_dir, variables)
        async with self._step("init"):
            await engine.init()
            await self.client.report_state_backends(engine.state_backends())

        async with self._step("plan"):
            terraform_values = {v["name"]: v["value"] for v in variables if v.get("kind") == "terraform"}
            var_file = write_var_file(self.work_dir, terraform_values)
            plan_file = self.work_dir / "plan.tfplan"
            destroy = spec.get("run_type") == "destroy"
            try:
                has_changes = await engine.plan(plan_file, var_file=var_file, destroy=destroy)
            finally:
                var_file.unlink(missing_ok=True)
            plan_json = await engine.show_json(plan_file)
            answer = await self.client.upload_plan(
                encode_plan_file(plan_file), plan_json, engine.lock_file(), variables
            )
            summary = answer.get("summary") or {}
            counts = ", ".join(
                f"{count} {name}" for name, count in summary.items() if isinstance(count, int) and count
            )
            recorded = answer.get("has_changes")
            changes = "changes" if (has_changes if recorded is None else recorded) else "no changes"
            self._log(f"Plan recorded: {changes}" + (f" ({counts})" if counts else ""))

    async def _apply_phase(self, spec: dict[str, Any]) -> None:
        # A run has one step per name, and the control plane refuses to start a finished step
        # again: checkout and init already ran in the plan phase. The apply phase is one step,
        # `apply`, whose log has the checkout, init and apply parts under their own headings.
        stack = spec["stack"]
        async with self._step(APPLY_STEP):
            self._log("--- checkout")
            plan = await self.client.get_plan()
            for variable in plan.get("variables") or []:
                self._add_secret_variable(variable)
            plan_bytes = self._verified_plan_file(plan)
            sha = spec.get("commit_sha") or plan.get("commit_sha")
            planned_at, named = plan.get("commit_sha"), spec.get("commit_sha")
            if planned_at and named and planned_at != named:
                raise PhaseFailure(f"the plan was made at commit {planned_at} but the spec names {named}")
            if not sha:
                raise PhaseFailure("the control plane gave no commit to apply")
            self._log(f"Plan file verified (SHA-256 {plan['sha256']})")
            self._log(f"Cloning {display_url(stack['repository'])} at commit {sha}")
            commit = await self._checkout(spec, sha=sha)
            code_dir = self._code_dir(stack.get("path"), commit)
            config = load_config(code_dir)
            variables = [dict(v) for v in plan.get("variables") or []]

            self._log("--- init")
            engine = self._engine(config, code_dir, variables)
            engine.restore_lock_file(plan.get("lock_file"))
            await engine.init(lockfile_readonly=plan.get("lock_file") is not None)
            await self.client.report_state_backends(engine.state_backends())

            self._log("--- apply")
            plan_file = self.work_dir / "plan.tfplan"
            plan_file.write_bytes(plan_bytes)
            tracker = ApplyTracker(self._planned(await engine.show_json(plan_file), engine))
            latest: dict[str, ResourceUpdate] = {}

            async def report(updates: list[ResourceUpdate]) -> None:
                if updates:
                    latest.update((u.address, u) for u in updates)
                    await self.client.report_resources([self._update_body(u) for u in updates])

            async def on_message(message: dict[str, Any]) -> None:
                self._log(readable_message(message))
                await report(tracker.feed(message))

            exit_code = await engine.apply(plan_file, on_message)
            await report(tracker.finish())
            failed = [address for address, u in latest.items() if u.state == "failed"]
            error = apply_error(tracker.run_errors, failed, exit_code, engine.binary)
            if error is not None:
                raise PhaseFailure(error)

    # -- pieces ---------------------------------------------------------------------------------

    @asynccontextmanager
    async def _step(self, name: str) -> AsyncIterator[None]:
        await self.client.step(name, "running")
        self._step_name = name
        try:
            yield
        except Unauthorized:
            raise
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) and self._stop_reason in (None, _UNAUTHORIZED):
                raise
            message = self._stop_reason if isinstance(exc, asyncio.CancelledError) else self._describe(exc)
            self._log(f"Error: {message}")
            await self._quiet_flush()
            await self.client.step(name, "failed")
            raise
        await self._quiet_flush()
        await self.client.step(name, "done")

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
        self, spec: dict[str, Any], *, branch: str | None = None, sha: str | None = None
    ) -> Commit:
        git_auth = spec.get("git_auth") or {}
        auth = GitAuth(git_auth.get("https_token"), git_auth.get("ssh_private_key"))
        dest = self.work_dir / "checkout"
        if dest.exists():
            await asyncio.to_thread(shutil.rmtree, dest)
        commit = await asyncio.to_thread(
            checkout, spec["stack"]["repository"], dest, branch=branch, sha=sha, auth=auth
        )
        self._log(f"Checked out {commit.sha}: {commit.message} ({commit.author})")
        return commit

    def _code_dir(self, path: str | None, commit: Commit) -> Path:
        root = (self.work_dir / "checkout").resolve()
        code_dir = (root / (path or ".").strip("/")).resolve()
        if not code_dir.is_relative_to(root) or ".git" in code_dir.relative_to(root).parts:
            raise PhaseFailure(f"the stack path {path!r} is outside the repository")
        if not code_dir.is_dir():
            raise PhaseFailure(f"the stack path {path!r} does not exist in commit {commit.sha}")
        return code_dir

    def _engine(self, config: StackConfig, code_dir: Path, variables: list[dict[str, Any]]) -> Engine:
        extra = dict(config.environment)
        for variable in variables:
            if variable.get("kind") == "env":
                value = variable.get("value")
                extra[variable["name"]] = value if isinstance(value, str) else json.dumps(value)
        env = engine_environment(self.base_env, self.work_dir, extra)
        return Engine(config.engine, code_dir=code_dir, work_dir=self.work_dir, env=env, log=self._log)

    def _verified_plan_file(self, plan: dict[str, Any]) -> bytes:
        try:
            data = base64.b64decode(plan["plan_file_b64"], validate=True)
        except (KeyError, TypeError, binascii.Error):
            raise PhaseFailure(
                "the stored plan file is not valid base64: it is not applied; plan again"
            ) from None
        digest = hashlib.sha256(data).hexdigest()
        expected = str(plan.get("sha256") or "").lower()
        if digest != expected:
            raise PhaseFailure(
                f"the plan file's SHA-256 is {digest}, not the recorded {expected or '(none)'}: "
                "it was altered or corrupted, so it is not applied; plan again"
            )
        return data

    def _planned(self, plan_json: dict[str, Any], engine: Engine) -> list[tuple[str, str, tuple[str, ...]]]:
        plans = plan_json.get("terragrunt_units") if engine.kind == "terragrunt" else {".": plan_json}
        return [
            (change.address, change.action, tuple(change.stage_order))
            for unit, unit_plan in (plans or {}).items()
            for change in changes_from_plan(unit_plan, unit=unit)
        ]

    def _update_body(self, update: ResourceUpdate) -> dict[str, Any]:
        return {
            "address": update.address,
            "state": update.state,
            "error": self.masker.mask(update.error) if update.error is not None else None,
            "stages": [{"action": s.action, "state": s.state} for s in update.stages],
        }

    def _add_secret_variable(self, variable: Mapping[str, Any]) -> None:
        if variable.get("sensitive"):
            for secret in secret_strings(variable.get("value")):
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
        try:
            await self.logs.stop()
        except ControlPlaneError:
            pass

    async def _finish(self, status: str, error: str | None) -> PhaseOutcome:
        error = self.masker.mask(error) if error is not None else None
        try:
            answer = await self.client.finish(status, error)
        except ControlPlaneError as exc:
            print(f"firstlume executor: could not report the result ({status}): {exc}", file=sys.stderr)
            return PhaseOutcome(None, error, None, 2)
        return PhaseOutcome(status, error, answer.get("status"), 0 if status == "succeeded" else 1)
