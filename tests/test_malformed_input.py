"""Malformed input is refused in the documented shape, never answered with a 5xx: bodies that are
not objects, not UTF-8, nested hundreds of levels, or hold a 5,000-digit integer, on every body
route of the app (REST, executor, state) and on /graphql; a hypothesis fuzz over every route finds
no 5xx."""

from __future__ import annotations

import asyncio
import json
import string
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from starlette.routing import Route

from conftest import make_stack, make_tenant
from firstlume.app import create_app
from firstlume.db.engine import Database
from firstlume.keys import load_keyring
from firstlume.pubsub import PubSub
from firstlume.services import dispatch
from firstlume.services.context import Context
from firstlume.settings import Settings
from support.examples import examples as scaled
from support.runs import start

DEEP = "[" * 1000 + "]" * 1000
DEEP_OBJECT = '{"a":' * 950 + "1" + "}" * 950
HUGE_INT = '{"offset": ' + "9" * 5000 + "}"
MALFORMED: dict[str, bytes] = {
    "nested 1000 levels": DEEP.encode(),
    "object nested 950 levels": DEEP_OBJECT.encode(),
    "integer of 5000 digits": HUGE_INT.encode(),
    "invalid UTF-8": b'{"name": "\xff\xfe"}',
    "NaN": b'{"offset": NaN}',
    "1e999": b'{"offset": 1e999}',
}
BODY_CODES = ("invalid_json", "invalid_state", "invalid_lock_info")
BODY_METHODS = {"POST", "PUT", "PATCH", "LOCK", "UNLOCK"}


@dataclass
class Target:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class World:
    http: httpx.AsyncClient
    targets: list[Target]


def fill(path: str, run_id: str) -> str:
    values = {"org": "acme", "stack": "one", "run": run_id, "name": "REGION", "unit": "net", "serial": "1"}
    for name, value in values.items():
        path = path.replace(f"{{{name}}}", value).replace(f"{{{name}:path}}", value)
        path = path.replace(f"{{{name}:int}}", value)
    while "{" in path:
        head, _, rest = path.partition("{")
        path = head + "prod" + rest.partition("}")[2]
    return path


@asynccontextmanager
async def world(settings: Settings) -> AsyncIterator[World]:
    """The app in process with an org, a stack and a claimed plan phase, and a target (method,
    filled path, credentials) for every route it serves."""
    async with AsyncExitStack() as stack:
        db = Database(settings.database_url)
        stack.push_async_callback(db.dispose)
        pubsub = PubSub("memory://")
        await pubsub.connect()
        stack.push_async_callback(pubsub.disconnect)
        ctx = Context(settings=settings, db=db, keyring=load_keyring(settings), pubsub=pubsub)
        tenant = await make_tenant(ctx, "acme", "ada@example.com")
        await make_stack(ctx, tenant, {"slug": "one", "repository": "file:///repo"})
        await start(ctx, tenant.token, tenant.org, "one", "apply")
        (launch,) = await dispatch.claim_plans(ctx)
        app = create_app(settings)
        await stack.enter_async_context(app.router.lifespan_context(app))
        http = await stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")
        )
        targets = []
        for route in app.routes:
            if not isinstance(route, Route) or not route.path.startswith(("/api/", "/graphql")):
                continue
            token = launch.token if route.path.startswith("/api/v1/executor") else tenant.token
            for method in sorted(route.methods or ()):
                if method != "HEAD":
                    targets.append(
                        Target(method, fill(route.path, launch.run_id), {"Authorization": f"Bearer {token}"})
                    )
        yield World(http, targets)


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    # The app lives on a loop of the test's own: hypothesis calls the test body synchronously.
    with asyncio.Runner() as runner:
        yield runner


def oauth_route(path: str) -> bool:
    """`terraform login`'s routes, which refuse in OAuth's shape (RFC 6749 §5.2)."""
    return path.startswith("/api/v1/cli-login/") or path.endswith("/cli-login")


def assert_error_shape(response: httpx.Response, where: str) -> None:
    assert response.status_code < 500, f"{where}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400 and oauth_route(where.split()[1]) and response.status_code != 413:
        body = response.json()
        if isinstance(body["error"], str):
            assert body["error_description"].endswith("."), where
            return
    if response.status_code >= 400 and where.split()[1] != "/graphql":
        error = response.json()["error"]
        assert error["code"] and error["message"].endswith("."), where


def test_every_body_route_refuses_malformed_json(settings: Settings, runner: asyncio.Runner) -> None:
    async def check() -> None:
        async with world(settings) as w:
            body_targets = [
                t
                for t in w.targets
                if t.method in BODY_METHODS
                and t.path not in ("/graphql", "/api/prod")
                # A Git host's webhook is judged by its headers and signature before its body
                # (tests/test_git_webhooks.py sends it invalid JSON with a valid signature).
                and not t.path.endswith("/git/webhook")
            ]
            assert len(body_targets) >= 19
            refused = set()
            for target in body_targets:
                for kind, body in MALFORMED.items():
                    where = f"{target.method} {target.path} ({kind})"
                    response = await w.http.request(
                        target.method, target.path, content=body, headers=target.headers
                    )
                    assert_error_shape(response, where)
                    if response.status_code < 300:
                        continue  # a route that reads no body (heartbeat, discard, ...)
                    if target.path.startswith("/api/v2/") and response.status_code == 404:
                        # The HCP Terraform API finds what its path names (a workspace, a run)
                        # before it reads a body, as HCP Terraform does; the ids filled in here
                        # name nothing. tests/test_cli_configuration_upload.py sends such routes
                        # malformed bodies with ids that exist.
                        assert response.json()["error"]["code"] == "not_found", where
                        continue
                    # Refused as the body it is, not for any other reason.
                    assert response.status_code in (400, 422), where + " " + response.text[:200]
                    if isinstance(response.json()["error"], str):  # OAuth's shape (checked above)
                        refused.add(target.path)
                        continue
                    assert response.json()["error"]["code"] in BODY_CODES, where + " " + response.text[:200]
                    refused.add(target.path)
            assert len(refused) >= 15, refused

    runner.run(check())


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"42", "must be a JSON object"),
        (b'"query"', "must be a JSON object"),
        (b"null", "must be a JSON object"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (
            b'{"query": "{ viewer { email } }", "variables": ' + DEEP_OBJECT.encode() + b"}",
            "nested more than 64",
        ),
        (b'{"query": "{ viewer { email } }", "variables": {"n": ' + b"1" * 5000 + b"}}", "4,300 digits"),
        (DEEP.encode(), "nested more than 64"),
    ],
)
def test_graphql_refuses_malformed_bodies(
    settings: Settings, runner: asyncio.Runner, body: bytes, words: str
) -> None:
    async def check() -> None:
        async with world(settings) as w:
            token = next(t.headers for t in w.targets if t.path.startswith("/api/v1/orgs"))
            response = await w.http.post(
                "/graphql", content=body, headers={**token, "Content-Type": "application/json"}
            )
            assert response.status_code == 400, response.text
            (error,) = response.json()["errors"]
            assert words in error["message"] and error["extensions"]["code"] == "invalid_json"

    runner.run(check())


def test_graphql_get_refuses_deep_variables(settings: Settings, runner: asyncio.Runner) -> None:
    async def check() -> None:
        async with world(settings) as w:
            response = await w.http.get(
                "/graphql", params={"query": "{ viewer { email } }", "variables": DEEP_OBJECT}
            )
            assert (
                response.status_code == 400
                and response.json()["errors"][0]["extensions"]["code"] == "invalid_json"
            )

    runner.run(check())


# --- fuzz -------------------------------------------------------------------------------------

KEYS = [
    "type", "slug", "name", "repository", "branch", "path", "folder", "offset", "step", "text",
    "status", "error", "acknowledged", "value", "sensitive", "hcl", "plan_json", "plan_file_b64",
    "variables", "updates", "address", "action", "require_approval", "confirm_destructive",
    "drift_schedule", "approvers", "forbid_self_approval", "sha", "commit_sha", "ID", "serial",
    "lineage", "version", "resources", "query", "operationName", "extensions",
]  # fmt: skip
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(
        ["plan", "apply", "succeeded", "failed", "main", "acme", "one", "user:x@y.z", "*/5 * * * *"]
    )
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=10), children, max_size=6)
    ),
    max_leaves=25,
)
bodies = (
    st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6).map(lambda d: json.dumps(d).encode())
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=200)
    | st.sampled_from(list(MALFORMED.values()))
)
query_params = st.dictionaries(
    st.sampled_from(["status", "type", "trigger", "limit", "before", "step", "follow", "active", "x"]),
    st.text(alphabet=string.printable, max_size=20) | st.integers().map(str),
    max_size=3,
)
GRAPHQL_DOCUMENTS = [
    "{ viewer { email } }",
    "query($org: String!) { organization(slug: $org) { slug stacks { slug } } }",
    "query($id: ID!) { run(id: $id) { id status } }",
    "mutation($input: StartRunInput!) { startRun(input: $input) { __typename } }",
    "{ " + "a { " * 40 + "}" * 40 + " }",
    "{ viewer { email " + "[" * 100 + " } }",
]
graphql_bodies = (
    st.fixed_dictionaries(
        {
            "query": st.sampled_from(GRAPHQL_DOCUMENTS) | st.text(max_size=80),
            "variables": st.none()
            | st.dictionaries(st.sampled_from(["org", "id", "input", "x"]), json_values, max_size=3),
        }
    ).map(lambda d: json.dumps(d).encode())
    | bodies
)


def fuzz_settings(examples: int) -> hypothesis_settings:
    return hypothesis_settings(max_examples=scaled(examples), **FUZZ)


FUZZ: dict[str, Any] = dict(
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


def test_fuzz_rest_and_executor_routes_never_answer_5xx(settings: Settings, runner: asyncio.Runner) -> None:
    opened = runner.run(_open(settings))
    w: World = opened[1]
    seen: dict[int, int] = {}

    @fuzz_settings(1500)
    @given(
        target=st.sampled_from([t for t in w.targets if t.path != "/graphql"]),
        body=bodies,
        params=query_params,
        authorized=st.booleans(),
    )
    def fuzz(target: Target, body: bytes, params: dict[str, str], authorized: bool) -> None:
        async def one() -> httpx.Response:
            headers = target.headers if authorized else {}
            content = body if target.method in BODY_METHODS else None
            return await w.http.request(
                target.method, target.path, content=content, params=params, headers=headers, timeout=30
            )

        if "follow" in params:
            params.pop("follow")  # a followed log streams until the run ends
        response = runner.run(one())
        seen[response.status_code] = seen.get(response.status_code, 0) + 1
        assert_error_shape(response, f"{target.method} {target.path} {body[:80]!r} {params}")

    try:
        fuzz()
    finally:
        runner.run(opened[0].aclose())
    assert sum(seen.values()) >= scaled(1500) and not [s for s in seen if s >= 500], seen


def test_fuzz_graphql_never_answers_5xx(settings: Settings, runner: asyncio.Runner) -> None:
    opened = runner.run(_open(settings))
    w: World = opened[1]
    headers = next(t.headers for t in w.targets if t.path.startswith("/api/v1/orgs"))
    seen: dict[int, int] = {}

    @fuzz_settings(1000)
    @given(body=graphql_bodies, authorized=st.booleans())
    def fuzz(body: bytes, authorized: bool) -> None:
        async def one() -> httpx.Response:
            sent = {**(headers if authorized else {}), "Content-Type": "application/json"}
            return await w.http.post("/graphql", content=body, headers=sent, timeout=30)

        response = runner.run(one())
        seen[response.status_code] = seen.get(response.status_code, 0) + 1
        assert response.status_code < 500, f"{body[:200]!r}: {response.status_code} {response.text[:300]}"
        assert "errors" in response.json() or "data" in response.json()

    try:
        fuzz()
    finally:
        runner.run(opened[0].aclose())
    assert sum(seen.values()) >= scaled(1000) and not [s for s in seen if s >= 500], seen


async def _open(settings: Settings) -> tuple[AsyncExitStack, World]:
    stack = AsyncExitStack()
    w = await stack.enter_async_context(world(settings))
    return stack, w
