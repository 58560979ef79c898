"""One small client per Git host kind, over httpx, for the two things Firstlume tells a host: a
commit status, and its one comment on a pull request (created once, then edited). Endpoints,
bodies and authentication are those of each host's published REST API:
- GitHub: POST /repos/{owner}/{repo}/statuses/{sha}; POST /repos/{owner}/{repo}/issues/{n}/comments,
  PATCH /repos/{owner}/{repo}/issues/comments/{id}; `Authorization: Bearer <token>`.
- Gitea/Forgejo: the same paths under /api/v1; `Authorization: token <token>`.
- GitLab: POST /projects/{id}/statuses/{sha} (state pending|running|success|failed|canceled, name);
  POST /projects/{id}/merge_requests/{iid}/notes, PUT .../notes/{note_id}; `PRIVATE-TOKEN`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from firstlume.domain.pull_requests import CommitState, HostKind

TIMEOUT_SECONDS = 10.0
USER_AGENT = "Firstlume-Git-Feedback/1"


class HostRefused(Exception):
    """The host did not take the message: its status code (None: no answer) and why."""

    def __init__(self, status_code: int | None, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass(frozen=True)
class Status:
    sha: str
    state: CommitState
    context: str
    description: str
    target_url: str


class HostClient(ABC):
    def __init__(self, http: httpx.AsyncClient, api_url: str, token: str, repository_path: str) -> None:
        self.http = http
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.repository_path = repository_path  # "owner/repo" (GitLab: "group/sub/project")

    @abstractmethod
    def _headers(self) -> dict[str, str]: ...

    async def _send(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = self.api_url + path
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **self._headers()}
        try:
            response = await self.http.request(method, url, json=body, headers=headers)
        except httpx.TimeoutException:
            raise HostRefused(None, f"no answer within {TIMEOUT_SECONDS:g} seconds") from None
        except httpx.HTTPError as error:
            raise HostRefused(None, f"{type(error).__name__}: {error}"[:500]) from None
        if not response.is_success:
            raise HostRefused(response.status_code, f"answered {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            return {}
        return answer if isinstance(answer, dict) else {}

    @abstractmethod
    async def set_status(self, status: Status) -> None: ...

    @abstractmethod
    async def create_comment(self, number: int, body: str) -> str:
        """Returns the host's id of the new comment."""

    @abstractmethod
    async def edit_comment(self, number: int, comment_id: str, body: str) -> None: ...


class GitHubClient(HostClient):
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": "application/vnd.github+json"}

    @property
    def _repo(self) -> str:
        return "/repos/" + "/".join(quote(part, safe="") for part in self.repository_path.split("/"))

    async def set_status(self, status: Status) -> None:
        body = {
            "state": status.state.value,
            "target_url": status.target_url,
            "description": status.description,
            "context": status.context,
        }
        await self._send("POST", f"{self._repo}/statuses/{status.sha}", body)

    async def create_comment(self, number: int, body: str) -> str:
        answer = await self._send("POST", f"{self._repo}/issues/{number}/comments", {"body": body})
        return str(answer.get("id", ""))

    async def edit_comment(self, number: int, comment_id: str, body: str) -> None:
        await self._send(
            "PATCH", f"{self._repo}/issues/comments/{quote(comment_id, safe='')}", {"body": body}
        )


class GiteaClient(GitHubClient):
    """Gitea and Forgejo: GitHub's paths and bodies, their own token header."""

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}


_GITLAB_STATES = {
    CommitState.PENDING: "pending",
    CommitState.SUCCESS: "success",
    CommitState.FAILURE: "failed",
    CommitState.ERROR: "canceled",
}


class GitLabClient(HostClient):
    def _headers(self) -> dict[str, str]:
        return {"PRIVATE-TOKEN": self.token}

    @property
    def _project(self) -> str:
        return "/projects/" + quote(self.repository_path, safe="")

    async def set_status(self, status: Status) -> None:
        body = {
            "state": _GITLAB_STATES[status.state],
            "name": status.context,
            "target_url": status.target_url,
            "description": status.description,
        }
        await self._send("POST", f"{self._project}/statuses/{status.sha}", body)

    async def create_comment(self, number: int, body: str) -> str:
        answer = await self._send("POST", f"{self._project}/merge_requests/{number}/notes", {"body": body})
        return str(answer.get("id", ""))

    async def edit_comment(self, number: int, comment_id: str, body: str) -> None:
        path = f"{self._project}/merge_requests/{number}/notes/{quote(comment_id, safe='')}"
        await self._send("PUT", path, {"body": body})


def client_for(
    kind: HostKind, http: httpx.AsyncClient, api_url: str, token: str, repository_path: str
) -> HostClient:
    classes: dict[HostKind, type[HostClient]] = {
        HostKind.GITHUB: GitHubClient,
        HostKind.GITEA: GiteaClient,
        HostKind.GITLAB: GitLabClient,
    }
    return classes[kind](http, api_url, token, repository_path)
