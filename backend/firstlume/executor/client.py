"""HTTP client of the executor protocol (docs/executor-protocol.md), one method per endpoint.

Connection errors and 5xx answers are retried with exponential backoff, a bounded number of
times. A 401 raises `Unauthorized` (the token is dead: the executor stops); any other 4xx
raises `RequestRejected` with the error code of the REST error shape.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

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


class Unauthorized(RequestRejected):
    """401: the token is wrong, expired or of a phase that already finished."""


class LogGap(RequestRejected):
    """409 log_gap: the batch starts past the end of the stored log."""

    @property
    def expected_offset(self) -> int:
        return int(self.details["expected_offset"])


Sleep = Callable[[float], Awaitable[None]]


class ExecutorClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
        max_attempts: int = 6,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 10.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + API_PREFIX,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )
        self._max_attempts = max(1, max_attempts)
        self._backoff = backoff_seconds
        self._max_backoff = max_backoff_seconds
        self._sleep = sleep

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ExecutorClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- endpoints -------------------------------------------------------------------------

    async def get_spec(self) -> dict[str, Any]:
        return await self._json("GET", "/spec")

    async def heartbeat(self) -> None:
        await self._request("POST", "/heartbeat")

    async def report_commit(self, sha: str, author: str, message: str, url: str | None) -> None:
        await self._request("POST", "/commit", {"sha": sha, "author": author, "message": message, "url": url})

    async def report_configuration(
        self, config_yaml: str | None, engine: str, variables: list[dict[str, Any]]
    ) -> None:
        body = {"config_yaml": config_yaml, "engine": engine, "variables": variables}
        await self._request("POST", "/configuration", body)

    async def step(self, name: str, status: str) -> None:
        # A retry after a lost answer finds the step already moved: the first attempt worked.
        await self._request(
            "POST",
            "/steps",
            {"name": name, "status": status},
            done_on_retry=lambda rejection: rejection.code == "step_out_of_order",
        )

    async def send_logs(self, offset: int, step: str, text: str) -> int:
        answer = await self._json("POST", "/logs", {"offset": offset, "step": step, "text": text})
        return int(answer["next_offset"])

    async def report_state_backends(self, backends: list[dict[str, str]]) -> None:
        await self._request("POST", "/state-backends", {"backends": backends})

    async def upload_plan(
        self,
        plan_file_b64: str,
        plan_json: dict[str, Any],
        lock_file: str | None,
        variables: list[dict[str, Any]],
    ) -> dict[str, Any]:
        body = {
            "plan_file_b64": plan_file_b64,
            "plan_json": plan_json,
            "lock_file": lock_file,
            "variables": variables,
        }
        answer = await self._request(
            "POST", "/plan", body, done_on_retry=lambda rejection: rejection.status == 409
        )
        if answer is None:
            # "already has a plan" on a retry: the attempt whose answer was lost stored it.
            return {"summary": None, "has_changes": None}
        return dict(answer.json())

    async def get_plan(self) -> dict[str, Any]:
        return await self._json("GET", "/plan")

    async def report_resources(self, updates: list[dict[str, Any]]) -> None:
        await self._request("POST", "/resources", {"updates": updates})

    async def finish(self, status: str, error: str | None) -> dict[str, Any]:
        answer = await self._request(
            "POST",
            "/finish",
            {"status": status, "error": error},
            done_on_retry=lambda rejection: isinstance(rejection, Unauthorized),
        )
        if answer is None or not answer.content:
            # The token died with the phase, so a 401 on a retry means the first attempt finished it.
            return {"status": None}
        return dict(answer.json())

    # -- transport -------------------------------------------------------------------------

    async def _json(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        response = await self._request(method, path, body)
        assert response is not None
        return dict(response.json())

    async def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        done_on_retry: Callable[[RequestRejected], bool] | None = None,
    ) -> httpx.Response | None:
        """`done_on_retry` recognises the refusal that means an earlier attempt, whose answer was
        lost, already did the work; the request then returns None."""
        failure = ""
        for attempt in range(1, self._max_attempts + 1):
            if attempt > 1:
                await self._sleep(self._delay(attempt - 1))
            try:
                response = await self._http.request(method, path, json=body)
            except httpx.TransportError as exc:
                failure = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                continue
            if response.status_code >= 500:
                failure = f"{response.status_code} {_error_fields(response)[1]}"
                continue
            if response.status_code >= 400:
                rejection = _rejection(method, path, response)
                if attempt > 1 and done_on_retry is not None and done_on_retry(rejection):
                    return None
                raise rejection
            return response
        raise ControlPlaneUnavailable(
            f"{method} {path} failed after {self._max_attempts} attempts; last error: {failure}"
        )

    def _delay(self, retry: int) -> float:
        delay = min(self._max_backoff, self._backoff * 2 ** (retry - 1))
        return float(delay * (0.5 + random.random() / 2))


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
