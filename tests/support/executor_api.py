"""Report one run phase over the executor HTTP API, as the real executor does, step by step."""

from __future__ import annotations

from typing import Any

import httpx


class ExecutorReports:
    """One phase token's reports. `client` reaches the control plane (in process or served)."""

    def __init__(self, client: httpx.AsyncClient, token: str, *, owns_client: bool = False) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}
        self.owns_client = owns_client
        self.offset = 0
        self.written = ""

    @classmethod
    def served(cls, base_url: str, token: str) -> ExecutorReports:
        return cls(httpx.AsyncClient(base_url=base_url, timeout=30), token, owns_client=True)

    async def close(self) -> None:
        if self.owns_client:
            await self.client.aclose()

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        response = await self.client.post(f"/api/v1/executor/{path}", json=body, headers=self.headers)
        assert response.status_code in (200, 204), response.text
        return response

    async def step(self, name: str, status: str) -> None:
        await self.post("steps", {"name": name, "status": status})

    async def log(self, step: str, text: str) -> None:
        response = await self.post("logs", {"offset": self.offset, "step": step, "text": text})
        self.offset = response.json()["next_offset"]
        self.written += text

    async def plan(self, plan_json: dict[str, Any]) -> None:
        await self.post("plan", {"plan_file_b64": "cGxhbg==", "plan_json": plan_json, "variables": []})

    async def finish(self, status: str = "succeeded", error: str | None = None) -> str:
        response = await self.post("finish", {"status": status, "error": error})
        return response.json()["status"]  # type: ignore[no-any-return]
