"""A password in a repository URL is refused, REST and GraphQL alike, with a pointer to
`git_https_token`, and never stored or echoed (issue 16.8)."""

from __future__ import annotations

import json

import httpx
import pytest

from conftest import Tenant

PASSWORD = "Pa55-in-the-url-never-stored"
URLS = [
    f"https://deploy:{PASSWORD}@git.example.com/team/infra.git",
    f"http://user:{PASSWORD}@10.0.0.1:8080/x.git",
    f"ssh://git:{PASSWORD}@git.example.com/x.git",
]


@pytest.mark.parametrize("url", URLS)
async def test_rest_refuses_a_repository_url_with_a_password(
    client: httpx.AsyncClient, tenant: Tenant, url: str
) -> None:
    response = await client.post(
        "/api/v1/orgs/acme/stacks", headers=tenant.headers, json={"slug": "infra", "repository": url}
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert "git_https_token" in error["message"] and "password" in error["message"]
    assert PASSWORD not in response.text
    listed = await client.get("/api/v1/orgs/acme/stacks", headers=tenant.headers)
    assert listed.json()["stacks"] == []


async def test_graphql_refuses_a_repository_url_with_a_password(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    response = await client.post(
        "/graphql",
        headers=tenant.headers,
        json={
            "query": """mutation($input: CreateStackInput!) { createStack(org: "acme", input: $input) {
                __typename ... on InvalidInputError { message } } }""",
            "variables": {"input": {"slug": "infra", "repository": URLS[0]}},
        },
    )
    result = response.json()["data"]["createStack"]
    assert result["__typename"] == "InvalidInputError"
    assert "git_https_token" in result["message"]
    assert PASSWORD not in json.dumps(response.json())


async def test_a_user_name_alone_and_scp_style_urls_are_accepted(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    for slug, url in (("a", "ssh://git@git.example.com/x.git"), ("b", "git@github.com:org/repo.git")):
        response = await client.post(
            "/api/v1/orgs/acme/stacks", headers=tenant.headers, json={"slug": slug, "repository": url}
        )
        assert response.status_code == 201, response.text
