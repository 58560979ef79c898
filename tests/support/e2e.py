"""End-to-end helpers: a served control plane with its scheduler and local executors, a stack in
a real Git repository, and a small REST client that waits for run states with timeouts."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from support.error_codes import check_error_codes
from support.git_repos import commit_files, make_repo
from support.waiting import wait_until


def backend_tf(state_path: Path) -> str:
    # Executors work in throwaway directories: state lives at a fixed path of the test's own.
    return 'terraform {\n  backend "local" {\n    path = "' + state_path.as_posix() + '"\n  }\n}\n'


@dataclass
class StackRepo:
    path: Path
    url: str
    state_path: Path
    subdir: str = "infra"

    def commit(self, files: dict[str, str | None], message: str) -> str:
        return commit_files(self.path, {f"{self.subdir}/{k}": v for k, v in files.items()}, message)

    def state(self) -> dict[str, Any]:
        return json.loads(self.state_path.read_text())

    def resources(self) -> dict[str, dict[str, Any]]:
        """address → attributes, from the local state file."""
        result = {}
        for resource in self.state().get("resources", []):
            for instance in resource["instances"]:
                address = f"{resource['type']}.{resource['name']}"
                if "index_key" in instance:
                    key = instance["index_key"]
                    address += f"[{json.dumps(key)}]" if isinstance(key, str) else f"[{key}]"
                result[address] = instance["attributes"]
        return result


def make_stack_repo(
    tmp_path: Path, main_tf: str, *, config_yaml: str | None = None, message: str = "Initial stack"
) -> StackRepo:
    state_path = tmp_path / "state" / "terraform.tfstate"
    state_path.parent.mkdir(parents=True, exist_ok=True)
    files = {"infra/main.tf": main_tf, "infra/backend.tf": backend_tf(state_path), "README.md": "a stack\n"}
    if config_yaml is not None:
        files["infra/config.yaml"] = config_yaml
    url, _ = make_repo(tmp_path / "repo", files, message=message)
    return StackRepo(path=tmp_path / "repo", url=url, state_path=state_path)


class Api:
    """The REST routes, as a script using the documentation would call them."""

    def __init__(self, base_url: str, org: str, token: str) -> None:
        self.o = f"{base_url}/api/v1/orgs/{org}"
        self.http = httpx.Client(
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
            event_hooks={"response": [check_error_codes]},  # codes listed in docs/rest-api.md
        )

    def close(self) -> None:
        self.http.close()

    def create_stack(self, slug: str, repo: StackRepo, **extra: Any) -> dict[str, Any]:
        body = {"slug": slug, "repository": repo.url, "path": repo.subdir, **extra}
        response = self.http.post(f"{self.o}/stacks", content=json.dumps(body))
        assert response.status_code == 201, response.text
        return response.json()  # type: ignore[no-any-return]

    def start(self, stack: str, run_type: str) -> str:
        response = self.http.post(f"{self.o}/stacks/{stack}/runs", content=json.dumps({"type": run_type}))
        assert response.status_code == 201, response.text
        return response.json()["id"]  # type: ignore[no-any-return]

    def run(self, run_id: str) -> dict[str, Any]:
        response = self.http.get(f"{self.o}/runs/{run_id}")
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    def changes(self, run_id: str) -> dict[str, Any]:
        return self.http.get(f"{self.o}/runs/{run_id}/changes").json()  # type: ignore[no-any-return]

    def by_address(self, run_id: str) -> dict[str, dict[str, Any]]:
        return {c["address"]: c for g in self.changes(run_id)["groups"] for c in g["changes"]}

    def log(self, run_id: str, step: str | None = None) -> str:
        params = {"step": step} if step else {}
        return self.http.get(f"{self.o}/runs/{run_id}/logs", params=params).text

    def post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return self.http.post(f"{self.o}{path}", content=json.dumps(body) if body is not None else b"")

    def approve(self, run_id: str, acknowledged: Iterable[str] = ()) -> dict[str, Any]:
        response = self.post(f"/runs/{run_id}/approve", {"acknowledged": list(acknowledged)})
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    def apply_approved(self, stack: str) -> str:
        """An apply of `stack`, approved once its plan awaits approval; returns it applied."""
        run_id = self.start(stack, "apply")
        self.wait(run_id, "awaiting_approval")
        self.approve(run_id)
        self.wait(run_id, "applied")
        return run_id

    def settings(self, path: str, body: dict[str, Any]) -> None:
        response = self.http.patch(f"{self.o}{path}/settings", content=json.dumps(body))
        assert response.status_code == 200, response.text

    def put_variable(self, path: str, name: str, body: dict[str, Any]) -> None:
        response = self.http.put(f"{self.o}{path}/variables/{name}", content=json.dumps(body))
        assert response.status_code == 200, response.text

    def wait(self, run_id: str, *statuses: str, timeout: float = 90) -> dict[str, Any]:
        """Waits until the run reaches one of `statuses`; fails at once if it finishes elsewhere."""
        finished = {"no_changes", "planned", "applied", "discarded", "drifted", "failed", "canceled"}

        def reached() -> dict[str, Any] | None:
            run = self.run(run_id)
            if run["status"] in statuses:
                return run
            if run["status"] in finished:
                raise AssertionError(
                    f"run ended {run['status']}, expected {statuses}: error={run['error']!r}"
                )
            return None

        return wait_until(reached, timeout, f"run {run_id} to reach {statuses}", interval=0.1)

    def history(self, run_id: str) -> list[str]:
        return [s["name"] for s in self.run(run_id)["steps"]]
