"""Pull requests: proposed runs from GitHub, Gitea/Forgejo and GitLab pull-request webhooks
against a real smart-HTTP Git server (the PR head pushed to the ref each host keeps it at). Each
test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from conftest import Tenant
from firstlume.db.models import Run
from firstlume.db.models_git import GitDelivery, PullRequest
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.git_http import GitHttpServer
from support.git_repos import commit_files, make_bare, make_repo, push
from support.pull_requests import pull_request_event, pull_request_payload, push_pull_request_head
from test_git_webhooks import MAIN_TF, TOKEN, signed

DIALECTS = ["github", "gitea", "forgejo", "gitlab"]


@pytest.fixture
def git_server(tmp_path: Path) -> Any:
    server = GitHttpServer(tmp_path / "srv", token=TOKEN)
    with server.running():
        yield server


class PullRequests:
    """A repository on the Git server, a stack planning its PRs, and deliveries of PR events."""

    def __init__(self, client: httpx.AsyncClient, tenant: Tenant, server: GitHttpServer, tmp: Path) -> None:
        self.client, self.tenant = client, tenant
        make_bare(tmp / "srv" / "infra")
        self.work = tmp / "work"
        make_repo(self.work, {"infra/main.tf": MAIN_TF, "docs/README.md": "docs\n"})
        self.url = server.url("infra")
        push(self.work, self.url, token=TOKEN)
        self.secret = ""

    @property
    def o(self) -> str:
        return f"/api/v1/orgs/{self.tenant.org}"

    async def setup(self, pull_requests: str = "plan") -> None:
        response = await self.client.post(f"{self.o}/git/webhook-secret", headers=self.tenant.headers)
        self.secret = response.json()["secret"]
        body = {
            "slug": "net",
            "repository": self.url,
            "path": "infra",
            "pull_requests": pull_requests,
            "git_https_token": TOKEN,
        }
        response = await self.client.post(f"{self.o}/stacks", json=body, headers=self.tenant.headers)
        assert response.status_code == 201, response.text
        assert response.json()["pull_requests"] == pull_requests

    def commit(self, files: dict[str, str | None], dialect: str, number: int = 7) -> str:
        head = commit_files(
            self.work, files, "Change", author=("Grace", "grace@example.com"), branch="feature"
        )
        push_pull_request_head(self.work, self.url, dialect, number, "feature", TOKEN)
        return head

    async def deliver(
        self, dialect: str, what: str, head: str, number: Any = 7, **options: Any
    ) -> httpx.Response:
        payload = pull_request_payload(dialect, self.url, number, what, head, **options)
        body = json.dumps(payload).encode()
        headers = signed(dialect, self.secret, body, str(uuid.uuid4()), event=pull_request_event(dialect))
        return await self.client.post(f"{self.o}/git/webhook", content=body, headers=headers)

    async def runs(self) -> list[dict[str, Any]]:
        response = await self.client.get(f"{self.o}/stacks/net/runs", headers=self.tenant.headers)
        return sorted(response.json()["runs"], key=lambda r: r["number"])  # type: ignore[no-any-return]

    async def deliveries(self) -> list[dict[str, Any]]:
        response = await self.client.get(f"{self.o}/git/deliveries", headers=self.tenant.headers)
        return response.json()["deliveries"]  # type: ignore[no-any-return]


@pytest.fixture
async def prs(
    client: httpx.AsyncClient, tenant: Tenant, git_server: GitHttpServer, tmp_path: Path
) -> PullRequests:
    return PullRequests(client, tenant, git_server, tmp_path)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_pr_touching_the_stack_starts_one_proposed_run_at_its_head(
    prs: PullRequests, dialect: str
) -> None:
    await prs.setup()
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, dialect)

    response = await prs.deliver(dialect, "open", head)

    assert response.status_code == 200, response.text
    [run] = await prs.runs()
    assert response.json() == {"runs": [run["id"]], "ignored": []}
    assert (run["type"], run["status"], run["proposed"]) == ("plan", "queued", True)
    number_url = "pull" if dialect != "gitlab" else "-/merge_requests"
    assert run["trigger"] == {
        "kind": "pull_request",
        "commit": head,
        "delivery": run["trigger"]["delivery"],
        "pull_request": {
            "number": 7,
            "url": f"{prs.url}/{number_url}/7",
            "title": "Widen the network",
            "author": "grace",
            "head_sha": head,
            "base_branch": "main",
        },
    }
    assert run["created_by"] == "git:grace@example.com"
    [entry] = await prs.deliveries()
    assert entry["head"] == head and entry["result"] == {"runs": [run["id"]], "ignored": []}


async def test_a_new_head_supersedes_the_queued_run_and_a_close_cancels_the_next(prs: PullRequests) -> None:
    await prs.setup()
    first = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
    await prs.deliver("github", "open", first)
    second = prs.commit({"infra/main.tf": MAIN_TF + "# v3\n"}, "github")

    response = await prs.deliver("github", "push", second)

    old, new = await prs.runs()
    assert response.json()["runs"] == [new["id"]]
    assert (old["status"], old["error"]) == ("canceled", f"superseded by {second[:7]}")
    assert (new["status"], new["trigger"]["commit"]) == ("queued", second)

    response = await prs.deliver("github", "close", second)

    assert response.status_code == 200
    assert response.json()["canceled"] == [new["id"]]
    _, closed = await prs.runs()
    assert (closed["status"], closed["error"]) == ("canceled", "the pull request was closed")


async def test_a_merge_cancels_queued_runs_and_leaves_started_ones(prs: PullRequests, ctx: Context) -> None:
    await prs.setup()
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "gitlab")
    await prs.deliver("gitlab", "open", head)
    [launch] = await dispatch.claim_plans(ctx)

    response = await prs.deliver("gitlab", "merge", head)

    assert response.json()["canceled"] == []
    [run] = await prs.runs()
    assert (run["id"], run["status"]) == (launch.run_id, "planning")
    async with ctx.db.read() as session:
        assert await session.scalar(select(PullRequest.state)) == "merged"


async def test_a_pr_touching_nothing_of_the_stack_starts_no_run(prs: PullRequests) -> None:
    await prs.setup()
    head = prs.commit({"docs/README.md": "more docs\n"}, "github")

    response = await prs.deliver("github", "open", head)

    assert response.json() == {
        "runs": [],
        "ignored": [
            {"stack": "net", "reason": "no changed file is under the stack's path or its watch globs"}
        ],
    }
    assert await prs.runs() == []


async def test_the_diff_is_against_the_merge_base_not_the_base_branchs_tip(prs: PullRequests) -> None:
    await prs.setup()
    head = prs.commit({"docs/README.md": "more docs\n"}, "github")
    # The base branch moves on (infra/ changes on main): the PR itself still touches only docs/.
    commit_files(prs.work, {"infra/main.tf": MAIN_TF + "# main\n"}, "On main", branch="main")
    push(prs.work, prs.url, token=TOKEN)

    response = await prs.deliver("github", "open", head)

    assert response.json()["runs"] == []


async def test_a_stack_with_pull_requests_off_and_a_replay_start_nothing(prs: PullRequests) -> None:
    await prs.setup(pull_requests="off")
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
    response = await prs.deliver("github", "open", head)
    assert response.json()["runs"] == [] and "no stack plans pull requests" in response.json()["reason"]

    patch = await prs.client.patch(
        f"{prs.o}/stacks/net", json={"pull_requests": "plan"}, headers=prs.tenant.headers
    )
    assert patch.status_code == 200 and patch.json()["pull_requests"] == "plan"
    body = json.dumps(pull_request_payload("github", prs.url, 7, "open", head)).encode()
    headers = signed("github", prs.secret, body, "delivery-1", event="pull_request")
    first = await prs.client.post(f"{prs.o}/git/webhook", content=body, headers=headers)
    again = await prs.client.post(f"{prs.o}/git/webhook", content=body, headers=headers)

    assert len(first.json()["runs"]) == 1
    assert again.json() == {"duplicate": True, "runs": []}
    assert len(await prs.runs()) == 1


@pytest.mark.parametrize("dialect", ["github", "gitlab"])
async def test_a_fork_pr_with_the_default_setting_gets_no_run_and_says_why(
    prs: PullRequests, dialect: str
) -> None:
    await prs.setup()
    head = prs.commit({"infra/main.tf": MAIN_TF + "# fork\n"}, dialect)

    response = await prs.deliver(dialect, "open", head, fork=True)

    [ignored] = response.json()["ignored"]
    assert ignored["stack"] == "net" and "fork" in ignored["reason"]
    assert await prs.runs() == []


async def test_approving_a_proposed_run_is_refused_with_409_proposed_run(prs: PullRequests) -> None:
    await prs.setup()
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
    await prs.deliver("github", "open", head)
    [run] = await prs.runs()

    response = await prs.client.post(f"{prs.o}/runs/{run['id']}/approve", json={}, headers=prs.tenant.headers)

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "proposed_run"


async def test_a_proposed_run_starts_while_a_tracked_run_holds_the_lock(
    prs: PullRequests, ctx: Context
) -> None:
    await prs.setup()
    tracked = await prs.client.post(
        f"{prs.o}/stacks/net/runs", json={"type": "apply"}, headers=prs.tenant.headers
    )
    queued_behind = await prs.client.post(
        f"{prs.o}/stacks/net/runs", json={"type": "plan"}, headers=prs.tenant.headers
    )
    [holder] = await dispatch.claim_plans(ctx)
    assert holder.run_id == tracked.json()["id"]
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
    [proposed] = (await prs.deliver("github", "open", head)).json()["runs"]

    [launch] = await dispatch.claim_plans(ctx)

    assert launch.run_id == proposed  # not the tracked plan queued behind the lock holder
    statuses = {r["id"]: r["status"] for r in await prs.runs()}
    assert statuses == {
        tracked.json()["id"]: "planning",
        queued_behind.json()["id"]: "queued",
        proposed: "planning",
    }


@pytest.mark.parametrize(
    ("number", "what"),
    [("7", "a string"), (-1, "negative"), (True, "a boolean"), (None, "missing")],
)
async def test_a_pr_number_that_is_not_a_number_is_422_and_only_logged(
    prs: PullRequests, ctx: Context, number: Any, what: str
) -> None:
    await prs.setup()
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")

    response = await prs.deliver("github", "open", head, number=number)

    assert response.status_code == 422, what
    body = response.json()["error"]
    assert body["code"] == "invalid_payload" and "number" in body["message"]
    async with ctx.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(Run)) == 0
        assert await session.scalar(select(func.count()).select_from(PullRequest)) == 0
        [refused] = list(await session.scalars(select(GitDelivery)))
    assert refused.http_status == 422 and refused.result["refused"] == "invalid_payload"


async def test_a_wrong_signature_and_a_10_mb_body_are_refused(prs: PullRequests, ctx: Context) -> None:
    await prs.setup()
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
    body = json.dumps(pull_request_payload("github", prs.url, 7, "open", head)).encode()
    headers = signed("github", "not-the-secret", body, "d-1", event="pull_request")

    wrong = await prs.client.post(f"{prs.o}/git/webhook", content=body, headers=headers)
    huge = await prs.client.post(
        f"{prs.o}/git/webhook",
        content=b" " * (10 * 1024 * 1024),
        headers=signed("github", prs.secret, b"", "d-2", event="pull_request"),
    )

    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_signature"
    assert huge.status_code == 413
    async with ctx.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(Run)) == 0
        assert await session.scalar(select(func.count()).select_from(PullRequest)) == 0


async def test_a_pr_of_a_repository_no_stack_uses_is_refused_keeping_only_its_delivery(
    prs: PullRequests, ctx: Context
) -> None:
    await prs.setup()
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
    payload = pull_request_payload("github", "https://github.invalid/else/where", 7, "open", head)
    body = json.dumps(payload).encode()

    response = await prs.client.post(
        f"{prs.o}/git/webhook",
        content=body,
        headers=signed("github", prs.secret, body, "d-3", event="pull_request"),
    )

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "unknown_repository"
    assert (
        "No stack of this organization uses repository 'https://github.invalid/else/where" in error["message"]
    )
    async with ctx.db.read() as session:
        assert await session.scalar(select(func.count()).select_from(Run)) == 0
        assert await session.scalar(select(func.count()).select_from(PullRequest)) == 0
    deliveries = (await prs.client.get(f"{prs.o}/git/deliveries", headers=prs.tenant.headers)).json()
    [logged] = [d for d in deliveries["deliveries"] if d["delivery"] == "d-3"]
    assert logged["http_status"] == 422 and logged["result"]["refused"] == "unknown_repository", logged


async def test_a_pr_against_a_branch_no_stack_follows_starts_nothing_and_says_so(prs: PullRequests) -> None:
    await prs.setup()
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
    payload = pull_request_payload("github", prs.url, 7, "open", head, base="release")
    body = json.dumps(payload).encode()

    response = await prs.client.post(
        f"{prs.o}/git/webhook",
        content=body,
        headers=signed("github", prs.secret, body, "d-4", event="pull_request"),
    )

    assert response.status_code == 200
    assert response.json()["runs"] == [] and "no stack plans pull requests" in response.json()["reason"]


@pytest.mark.parametrize(
    ("policy", "sensitive_given"), [("plan_without_secrets", False), ("plan", True)], ids=["without", "with"]
)
async def test_a_fork_pr_plans_as_pull_requests_from_forks_says(
    prs: PullRequests, ctx: Context, policy: str, sensitive_given: bool
) -> None:
    await prs.setup()
    h = prs.tenant.headers
    for name, body in (
        ("region", {"value": "eu"}),
        ("db_password", {"value": "s3cr3t-fork", "sensitive": True}),
    ):
        response = await prs.client.put(f"{prs.o}/stacks/net/variables/{name}", json=body, headers=h)
        assert response.status_code == 200, response.text
    response = await prs.client.patch(
        f"{prs.o}/settings", json={"pull_requests_from_forks": policy}, headers=h
    )
    assert response.status_code == 200, response.text
    head = prs.commit({"infra/main.tf": MAIN_TF + "# fork\n"}, "github")

    [run_id] = (await prs.deliver("github", "open", head, fork=True)).json()["runs"]
    [launch] = await dispatch.claim_plans(ctx)
    spec = await prs.client.get("/api/v1/executor/spec", headers={"Authorization": f"Bearer {launch.token}"})

    assert launch.run_id == run_id and spec.status_code == 200, spec.text
    names = {v["name"] for v in spec.json()["variables"]}
    assert ("db_password" in names) is sensitive_given and "region" in names
    assert spec.json()["proposed"] is True and spec.json()["commit_ref"] == "refs/pull/7/head"
    settings = (await prs.client.get(f"{prs.o}/stacks/net/settings", headers=h)).json()
    assert "pull_requests_from_forks" in json.dumps(settings)


async def test_pull_requests_from_forks_refuses_an_unknown_value(prs: PullRequests) -> None:
    response = await prs.client.patch(
        f"{prs.o}/settings", json={"pull_requests_from_forks": "yes"}, headers=prs.tenant.headers
    )
    assert response.status_code == 422


async def test_a_proposed_run_does_not_wait_for_a_persons_state_lock(prs: PullRequests, ctx: Context) -> None:
    await prs.setup()
    lock = json.dumps(
        {"ID": "desk-1", "Operation": "OperationTypeApply", "Who": "ada@desk", "Version": "1.11.0"}
    )
    locked = await prs.client.request(
        "LOCK", f"{prs.o}/stacks/net/state/lock", content=lock, headers=prs.tenant.headers
    )
    assert locked.status_code == 200, locked.text
    tracked = (
        await prs.client.post(f"{prs.o}/stacks/net/runs", json={"type": "plan"}, headers=prs.tenant.headers)
    ).json()
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
    [proposed] = (await prs.deliver("github", "open", head)).json()["runs"]

    waiting = (await prs.client.get(f"{prs.o}/runs/{proposed}", headers=prs.tenant.headers)).json()
    [launch] = await dispatch.claim_plans(ctx)

    assert waiting["waiting_for"] is None
    assert launch.run_id == proposed  # the tracked plan waits for the person's lock
    statuses = {r["id"]: r["status"] for r in await prs.runs()}
    assert statuses == {tracked["id"]: "queued", proposed: "planning"}


GRAPHQL_PULL_REQUESTS = """query($org: String!) { organization(slug: $org) {
  stack(slug: "net") { pullRequests }
  pullRequests(state: "open", stack: "net") { number title author headSha state runs { id stack status } }
  gitHosts { host kind apiUrl tokenSet }
  runs: stack(slug: "net") { runs(first: 5) { nodes { id proposed trigger { kind commit pullRequest { number url headSha baseBranch } } } } }
} }"""
PUT_GIT_HOST = """mutation($org: String!) {
  putGitHost(org: $org, host: "gitea.example.com", input: {kind: GITEA, apiUrl: "https://gitea.example.com/api/v1", token: "gt-secret-1"}) {
    __typename ... on GitHost { host kind apiUrl tokenSet }
  }
}"""


async def test_graphql_has_the_pull_requests_hosts_and_proposed_runs(prs: PullRequests) -> None:
    await prs.setup()
    head = prs.commit({"infra/main.tf": MAIN_TF + "# v2\n"}, "github")
    [run_id] = (await prs.deliver("github", "open", head)).json()["runs"]

    put = await prs.client.post(
        "/graphql",
        json={"query": PUT_GIT_HOST, "variables": {"org": prs.tenant.org}},
        headers=prs.tenant.headers,
    )
    read = await prs.client.post(
        "/graphql",
        json={"query": GRAPHQL_PULL_REQUESTS, "variables": {"org": prs.tenant.org}},
        headers=prs.tenant.headers,
    )

    assert put.json()["data"]["putGitHost"] == {
        "__typename": "GitHost",
        "host": "gitea.example.com",
        "kind": "GITEA",
        "apiUrl": "https://gitea.example.com/api/v1",
        "tokenSet": True,
    }
    assert "gt-secret-1" not in put.text + read.text
    org = read.json()["data"]["organization"]
    assert org["stack"] == {"pullRequests": "PLAN"}
    assert org["pullRequests"] == [
        {
            "number": 7,
            "title": "Widen the network",
            "author": "grace",
            "headSha": head,
            "state": "open",
            "runs": [{"id": run_id, "stack": "net", "status": "queued"}],
        }
    ]
    assert org["gitHosts"] == [
        {
            "host": "gitea.example.com",
            "kind": "GITEA",
            "apiUrl": "https://gitea.example.com/api/v1",
            "tokenSet": True,
        }
    ]
    [run] = org["runs"]["runs"]["nodes"]
    assert run == {
        "id": run_id,
        "proposed": True,
        "trigger": {
            "kind": "PULL_REQUEST",
            "commit": head,
            "pullRequest": {"number": 7, "url": f"{prs.url}/pull/7", "headSha": head, "baseBranch": "main"},
        },
    }
