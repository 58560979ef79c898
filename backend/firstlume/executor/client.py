"""HTTP client of the executor protocol (docs/executor-protocol.md), one method per endpoint.

Requests are built from the protocol's models and answers parsed into them, so a malformed
answer is an `InvalidAnswer` that names the field, not a KeyError deep in a phase. Connection
errors and 5xx answers are retried (retry.CONTROL_PLANE_REQUEST), a bounded number of times. A 401
raises `Unauthorized` (the token is dead: the executor stops); any other 4xx raises
`RequestRejected` with the error code of the REST error shape.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from firstlume import retry
from firstlume.domain.runs import StepStatus
from firstlume.protocol.executor import (
    Answer,
    CommitReport,
    ConfigurationReport,
    FinishAnswer,
    FinishReport,
    LogAccepted,
    LogBatch,
    PhaseResult,
    PhaseSpec,
    PlanDownload,
    PlanRecorded,
    PlanUpload,
    Report,
    ReportBatch,
    ResourceReport,
    ResourceReports,
    StateBackend,
    StateBackendsReport,
    StepReport,
    describe,
)

API_PREFIX = "/api/v1/executor"


class ControlPlaneError(Exception):
    """Base of every failure to talk to the control plane."""


class ControlPlaneUnavailable(ControlPlaneError):
    """Connection errors or 5xx answers, still failing after the last retry."""


class RequestRejected(ControlPlaneError):
    """A 4xx answer: retrying the same request would not help."""

    def __init__(self, method: str, path: str, status: int, code: str, message: str, details: dict[str, Any]):
        super().__init__(f"{method} {path} was refused with {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


class InvalidAnswer(ControlPlaneError):
    """The control plane answered something that is not the protocol's answer."""


class Unauthorized(RequestRejected):
    """401: the token is wrong, expired or of a phase that already finished."""


class LogGap(RequestRejected):
    """409 log_gap: the batch starts past the end of the stored log."""

    @property
    def expected_offset(self) -> int:
        return int(self.details["expected_offset"])


Sleep = Callable[[float], Awaitable[None]]
AnswerT = TypeVar("AnswerT", bound=Answer)


class ExecutorClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
        max_attempts: int | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + API_PREFIX,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
            # Loading the CA bundle is a good part of the executor's start-up; a plain-HTTP
            # control plane (the local launcher's) has no certificate to check. HTTPS verifies.
            verify=_tls_verification(base_url),
        )
        # Terraform's http backend reaches the managed state with these (executor/managed_state.py).
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._max_attempts = max(1, max_attempts or retry.CONTROL_PLANE_REQUEST.attempts or 1)
        self._sleep = sleep
        self._clock = time.monotonic
        # Requests the control plane could not store (503 storage_unavailable), by path, since
        # their first refusal: a success of the same path forgets it.
        self._storage_refused: dict[str, StorageRefusal] = {}

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ExecutorClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def refused_for(self, refusal: StorageRefusal) -> float:
        """Seconds since `refusal` began."""
        return self._clock() - refusal.since

    def storage_refusal(self) -> StorageRefusal | None:
        """The oldest refusal for storage not followed by a success of its request, if any."""
        return min(self._storage_refused.values(), key=lambda r: r.since, default=None)

    # -- endpoints -------------------------------------------------------------------------

    async def get_spec(self) -> PhaseSpec:
        return await self._answer("GET", "/spec", PhaseSpec)

    async def heartbeat(self) -> None:
        # One attempt: the next beat is the retry. Backing off inside a beat would leave a
        # control plane that just restarted without news for longer than its timeout.
        await self._request("POST", "/heartbeat", attempts=1)

    async def report_commit(self, sha: str, author: str, message: str, url: str | None) -> None:
        await self._request("POST", "/commit", CommitReport(sha=sha, author=author, message=message, url=url))

    async def report_configuration(self, report: ConfigurationReport) -> None:
        await self._request("POST", "/configuration", report)

    async def step(self, name: str, status: StepStatus) -> None:
        # A retry after a lost answer finds the step already moved: the first attempt worked.
        await self._request(
            "POST",
            "/steps",
            StepReport(name=name, status=status),
            done_on_retry=lambda rejection: rejection.code == "step_out_of_order",
        )

    async def send_logs(self, offset: int, step: str, text: str) -> int:
        batch = LogBatch(offset=offset, step=step, text=text)
        return (await self._answer("POST", "/logs", LogAccepted, batch)).next_offset

    async def report_state_backends(self, backends: list[StateBackend]) -> None:
        await self._request("POST", "/state-backends", StateBackendsReport(backends=backends))

    async def report(self, reports: list[Report]) -> None:
        # Every report is recorded again without effect (a step's status it already has, a
        # commit already stored): a retry after a lost answer is harmless, the batch being
        # recorded whole or not at all.
        await self._request("POST", "/reports", ReportBatch(reports=reports))

    async def upload_plan(self, upload: PlanUpload) -> PlanRecorded:
        answer = await self._request(
            "POST", "/plan", upload, done_on_retry=lambda rejection: rejection.status == 409
        )
        if answer is None:
            # "already has a plan" on a retry: the attempt whose answer was lost stored it.
            return PlanRecorded(summary=None, has_changes=None)
        return _parse("POST", "/plan", PlanRecorded, answer)

    async def get_plan(self) -> PlanDownload:
        return await self._answer("GET", "/plan", PlanDownload)

    async def get_configuration(self) -> bytes:
        """A CLI run's uploaded code: the .tar.gz as the CLI sent it."""
        response = await self._request("GET", "/configuration-version")
        assert response is not None
        return response.content

    async def report_resources(self, updates: list[ResourceReport]) -> None:
        await self._request("POST", "/resources", ResourceReports(updates=updates))

    async def finish(
        self,
        status: PhaseResult,
        error: str | None,
        last_step: str | None = None,
        log: LogBatch | None = None,
        resources: list[ResourceReport] | None = None,
        storage_patience: float | None = None,
    ) -> FinishAnswer:
        """Reports the phase's result. While the control plane answers that it cannot store it
        (503 storage_unavailable), it is tried again for up to `storage_patience` seconds."""
        report = FinishReport(
            status=status, error=error, last_step=last_step, log=log, resources=resources or []
        )
        started = self._clock()
        while True:
            try:
                answer = await self._request(
                    "POST",
                    "/finish",
                    report,
                    done_on_retry=lambda rejection: isinstance(rejection, Unauthorized),
                )
                break
            except ControlPlaneUnavailable:
                # The control plane cannot store the result now (a full disk): it is tried
                # again, so that the run ends as soon as a write succeeds again, for as long as
                # the control plane waits for a silent phase (it then fails the phase itself).
                refusal = self._storage_refused.get("/finish")
                if storage_patience is None or refusal is None or self._clock() - started > storage_patience:
                    raise
                await self._sleep(refusal.retry_after)
        if answer is None or not answer.content:
            # The token died with the phase, so a 401 on a retry means the first attempt finished it.
            return FinishAnswer(status=None)
        return _parse("POST", "/finish", FinishAnswer, answer)

    # -- transport -------------------------------------------------------------------------

    async def _answer(
        self, method: str, path: str, model: type[AnswerT], body: BaseModel | None = None
    ) -> AnswerT:
        response = await self._request(method, path, body)
        assert response is not None
        return _parse(method, path, model, response)

    async def _request(
        self,
        method: str,
        path: str,
        body: BaseModel | None = None,
        *,
        done_on_retry: Callable[[RequestRejected], bool] | None = None,
        attempts: int | None = None,
    ) -> httpx.Response | None:
        """`done_on_retry` recognises the refusal that means an earlier attempt, whose answer was
        lost, already did the work; the request then returns None."""
        content = body.model_dump_json().encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        tries = attempts or self._max_attempts
        try:
            async for attempt in retry.CONTROL_PLANE_REQUEST.retrying(
                _Unanswered, attempts=tries, sleep=self._sleep
            ):
                with attempt:
                    response = await self._send(method, path, content, headers)
                    if response.status_code >= 400:
                        rejection = _rejection(method, path, response)
                        retried = attempt.retry_state.attempt_number > 1
                        if retried and done_on_retry is not None and done_on_retry(rejection):
                            return None
                        raise rejection
                    return response
        except _Unanswered as failure:
            raise ControlPlaneUnavailable(
                f"{method} {path} failed after {tries} attempts; last error: {failure}"
            ) from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _send(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str] | None
    ) -> httpx.Response:
        """The answer, unless it is one worth asking again for (no answer, a 5xx): _Unanswered."""
        try:
            response = await self._http.request(method, path, content=content, headers=headers)
        except httpx.TransportError as exc:
            raise _Unanswered(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc
        if method != "GET":
            self._note_storage(path, response)
        if response.status_code >= 500:
            raise _Unanswered(f"{response.status_code} {_error_fields(response)[1]}")
        return response

    def _note_storage(self, path: str, response: httpx.Response) -> None:
        if response.status_code < 400:
            self._storage_refused.pop(path, None)
            return
        code, message, details = _error_fields(response)
        if response.status_code == 503 and code == STORAGE_UNAVAILABLE and path not in self._storage_refused:
            kind = str(details.get("storage") or "")
            wait = response.headers.get("retry-after", "")
            retry_after = float(wait) if wait.isdigit() else DEFAULT_RETRY_AFTER
            self._storage_refused[path] = StorageRefusal(path, self._clock(), kind, message, retry_after)


STORAGE_UNAVAILABLE = "storage_unavailable"
# Seconds between tries of a result the control plane could not store, when it names none.
DEFAULT_RETRY_AFTER = 5.0


@dataclass(frozen=True)
class StorageRefusal:
    """The control plane answered 503 `storage_unavailable` to `path` from `since` (monotonic
    seconds) on: its database can store nothing (`kind`: full, read_only, gone)."""

    path: str
    since: float
    kind: str
    message: str
    retry_after: float = 5.0

    @property
    def prefix(self) -> str:
        """How a run's error that it caused begins (the control plane's words for the same)."""
        return {"full": "storage full", "read_only": "storage read-only"}.get(
            self.kind, "storage unavailable"
        )


class _Unanswered(Exception):
    """No answer (a connection error) or a 5xx: retried (retry.CONTROL_PLANE_REQUEST)."""


def _tls_verification(base_url: str) -> ssl.SSLContext | bool:
    if base_url.lower().startswith("https:"):
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # never used: no TLS over http://


def _parse(method: str, path: str, model: type[AnswerT], response: httpx.Response) -> AnswerT:
    try:
        return model.model_validate_json(response.content)
    except ValidationError as error:
        _, problem = describe(error)
        raise InvalidAnswer(
            f"the control plane's answer to {method} {path} is not valid: {problem}"
        ) from None


def _error_fields(response: httpx.Response) -> tuple[str, str, dict[str, Any]]:
    try:
        payload = response.json()
    except ValueError:
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        return "http_" + str(response.status_code), response.reason_phrase or "", {}
    code = str(error.get("code") or f"http_{response.status_code}")
    message = str(error.get("message") or response.reason_phrase or "")
    details = {k: v for k, v in error.items() if k not in ("code", "message")}
    return code, message, details


def _rejection(method: str, path: str, response: httpx.Response) -> RequestRejected:
    code, message, details = _error_fields(response)
    status = response.status_code
    if status == 401:
        return Unauthorized(method, path, status, code, message, details)
    if status == 409 and code == "log_gap" and "expected_offset" in details:
        return LogGap(method, path, status, code, message, details)
    return RequestRejected(method, path, status, code, message, details)
