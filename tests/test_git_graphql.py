"""Git-driven runs over GraphQL: a stack's trigger (create and update), the webhook secret
rotation (shown once), the delivery log, and a push run's trigger. Both databases."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import Tenant
from support.git_http import GitHttpServer
from support.git_repos import commit_files, make_bare, make_repo, push

TOKEN = "ghp_graphql_token_77"
MAIN_TF = 'resource "terraform_data" "a" {}\n'

STACK_FIELDS = "slug trigger repository branch path"


async def gql(client: httpx.AsyncClient, tenant: Tenant, query: str, **variables: Any) -> dict[str, Any]:
    response = await client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=tenant.headers
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert "errors" not in body, body
    return body["data"]  # type: ignore[no-any-return]


@pytest.fixture
def origin(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    server = GitHttpServer(tmp_path / "srv", token=TOKEN)
    with server.running():
        make_bare(tmp_path / "srv" / "infra")
        work = tmp_path / "work"
        make_repo(work, {"infra/main.tf": MAIN_TF})
        url = server.url("infra")
        push(work, url, token=TOKEN)
        yield work, url


async def test_trigger_secret_and_deliveries_over_graphql(
    client: httpx.AsyncClient, tenant: Tenant, origin: tuple[Path, str]
) -> None:
    work, url = origin
    created = await gql(
        client,
        tenant,
        f"""mutation($input: CreateStackInput!) {{
              createStack(org: "acme", input: $input) {{ __typename ... on Stack {{ {STACK_FIELDS} }} }} }}""",
        input={"slug": "net", "repository": url, "path": "infra", "gitHttpsToken": TOKEN},
    )
    assert created["createStack"]["trigger"] == "MANUAL"

    updated = await gql(
        client,
        tenant,
        f"""mutation {{ updateStack(org: "acme", stack: "net", input: {{trigger: PLAN, branch: "main"}}) {{
              __typename ... on Stack {{ {STACK_FIELDS} }} }} }}""",
    )
    assert updated["updateStack"] == {
        "__typename": "Stack",
        "slug": "net",
        "trigger": "PLAN",
        "repository": url,
        "branch": "main",
        "path": "infra",
    }
    refused = await gql(
        client,
        tenant,
        """mutation { updateStack(org: "acme", stack: "net", input: {path: "../x"}) {
              __typename ... on InvalidInputError { code message } } }""",
    )
    assert refused["updateStack"]["__typename"] == "InvalidInputError"
    missing = await gql(
        client,
        tenant,
        """mutation { updateStack(org: "acme", stack: "nope", input: {trigger: APPLY}) {
              __typename ... on NotFoundError { code } } }""",
    )
    assert missing["updateStack"] == {"__typename": "NotFoundError", "code": "not_found"}

    rotated = await gql(
        client,
        tenant,
        """mutation { rotateWebhookSecret(org: "acme") { __typename ... on WebhookSecret { secret } } }""",
    )
    secret = rotated["rotateWebhookSecret"]["secret"]
    before = commit_files(work, {}, "noop")  # a commit outside the stack's path
    push(work, url, token=TOKEN)
    head = commit_files(
        work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change", author=("Grace", "grace@example.com")
    )
    push(work, url, token=TOKEN)
    body = json.dumps(
        {"ref": "refs/heads/main", "before": before, "after": head, "repository": {"clone_url": url + ".git"}}
    ).encode()
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    hook = await client.post(
        "/api/v1/orgs/acme/git/webhook",
        content=body,
        headers={
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": "d-42",
            "X-Hub-Signature-256": f"sha256={digest}",
        },
    )
    assert hook.status_code == 200, hook.text

    data = await gql(
        client,
        tenant,
        """{ organization(slug: "acme") {
              webhookSecretSetAt
              gitDeliveries { source delivery ref head httpStatus runs outcome ignored { stack reason } }
              stack(slug: "net") { trigger runs { nodes { createdBy trigger { kind commit delivery } } } } } }""",
    )
    org = data["organization"]
    assert org["webhookSecretSetAt"]
    [delivery] = org["gitDeliveries"]
    assert delivery["source"] == "webhook:github"
    assert (delivery["delivery"], delivery["ref"], delivery["head"], delivery["httpStatus"]) == (
        "d-42",
        "refs/heads/main",
        head,
        200,
    )
    assert delivery["outcome"] == "1 run started"
    assert delivery["ignored"] == []
    [run] = org["stack"]["runs"]["nodes"]
    assert run == {
        "createdBy": "git:grace@example.com",
        "trigger": {"kind": "PUSH", "commit": head, "delivery": "d-42"},
    }
    assert delivery["runs"] and secret not in json.dumps(data)
