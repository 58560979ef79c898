"""Git-driven runs found by polling: a real Git server over smart HTTP (git http-backend) and
file:// repositories, pushed to with pygit2; the control plane asks with ls-remote and fetches
and diffs with pygit2. Each test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import Tenant
from firstlume.db.models_git import GitPollLease
from firstlume.scheduler.git_poll import GitPoller
from firstlume.services import dispatch
from firstlume.services.context import Context
from firstlume.services.git.polling import cache_of, claim_poll, poll_once
from support.git_http import GitHttpServer
from support.git_repos import commit_files, make_bare, make_repo, push
from support.waiting import until

TOKEN = "ghp_poll_token_9f2c"
MAIN_TF = 'resource "terraform_data" "a" {}\n'


@pytest.fixture
def git_server(tmp_path: Path) -> Iterator[GitHttpServer]:
    server = GitHttpServer(tmp_path / "srv", token=TOKEN)
    with server.running():
        yield server


@pytest.fixture
def origin(tmp_path: Path, git_server: GitHttpServer) -> tuple[Path, str]:
    """A working repository pushed to a bare `infra` repository on the smart-HTTP server."""
    make_bare(tmp_path / "srv" / "infra")
    work = tmp_path / "work"
    make_repo(work, {"infra/main.tf": MAIN_TF, "docs/README.md": "docs\n", "modules/net/main.tf": "# net\n"})
    url = git_server.url("infra")
    push(work, url, token=TOKEN)
    return work, url


async def create_stack(client: httpx.AsyncClient, tenant: Tenant, **body: Any) -> dict[str, Any]:
    response = await client.post(f"/api/v1/orgs/{tenant.org}/stacks", json=body, headers=tenant.headers)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


async def runs_of(client: httpx.AsyncClient, tenant: Tenant, stack: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/v1/orgs/{tenant.org}/stacks/{stack}/runs", headers=tenant.headers)
    assert response.status_code == 200, response.text
    return response.json()["runs"]  # type: ignore[no-any-return]


async def triggered_stack(client: httpx.AsyncClient, tenant: Tenant, url: str, trigger: str = "plan") -> None:
    stack = await create_stack(
        client, tenant, slug="net", repository=url, path="infra", trigger=trigger, git_https_token=TOKEN
    )
    assert stack["trigger"] == trigger
    assert TOKEN not in str(stack)


async def test_a_push_under_the_stack_path_starts_one_run_of_the_trigger_type_at_the_new_head(
    ctx: Context, client: httpx.AsyncClient, tenant: Tenant, origin: tuple[Path, str]
) -> None:
    work, url = origin
    await triggered_stack(client, tenant, url, trigger="apply")
    assert await poll_once(ctx, cache_of(ctx)) == []  # the head when switched on is the baseline
    assert await runs_of(client, tenant, "net") == []

    head = commit_files(
        work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change infra", author=("Grace", "grace@example.com")
    )
    push(work, url, token=TOKEN)
    [outcome] = await poll_once(ctx, cache_of(ctx))
    again = await poll_once(ctx, cache_of(ctx))

    [run] = await runs_of(client, tenant, "net")
    assert outcome.runs == [run["id"]]
    assert again == []
    assert run["type"] == "apply"
    assert run["status"] == "queued"
    assert run["trigger"] == {"kind": "push", "commit": head, "delivery": None}
    assert run["created_by"] == "git:grace@example.com"
    deliveries = (
        await client.get(f"/api/v1/orgs/{tenant.org}/git/deliveries", headers=tenant.headers)
    ).json()
    [logged] = deliveries["deliveries"]
    assert (logged["source"], logged["head"], logged["result"]["runs"]) == ("poll", head, [run["id"]])


async def test_a_push_touching_only_other_paths_starts_nothing_and_watch_globs_widen_the_match(
    ctx: Context, client: httpx.AsyncClient, tenant: Tenant, origin: tuple[Path, str]
) -> None:
    work, url = origin
    await triggered_stack(client, tenant, url)

    commit_files(work, {"docs/README.md": "more docs\n"}, "Docs only")
    push(work, url, token=TOKEN)
    [outcome] = await poll_once(ctx, cache_of(ctx))
    assert outcome.runs == []
    assert outcome.ignored == [
        {"stack": "net", "reason": "no changed file is under the stack's path or its watch globs"}
    ]

    commit_files(work, {"modules/net/main.tf": "# net v2\n"}, "Module only, not watched yet")
    push(work, url, token=TOKEN)
    assert (await poll_once(ctx, cache_of(ctx)))[0].runs == []

    # The config.yaml of the new commit says which other paths count.
    commit_files(work, {"infra/config.yaml": 'watch: ["modules/**"]\n'}, "Watch modules")
    push(work, url, token=TOKEN)
    assert len((await poll_once(ctx, cache_of(ctx)))[0].runs) == 1  # config.yaml is under infra/
    head = commit_files(work, {"modules/net/main.tf": "# net v3\n"}, "Module change, watched")
    push(work, url, token=TOKEN)
    [outcome] = await poll_once(ctx, cache_of(ctx))

    assert len(outcome.runs) == 1
    runs = await runs_of(client, tenant, "net")
    assert [r["trigger"]["commit"] for r in runs if r["status"] == "queued"] == [head]


async def test_two_replicas_polling_the_same_repository_start_one_run(
    ctx: Context, client: httpx.AsyncClient, tenant: Tenant, origin: tuple[Path, str], settings: Any
) -> None:
    work, url = origin
    await triggered_stack(client, tenant, url)
    head = commit_files(work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change infra")
    push(work, url, token=TOKEN)

    # Two replicas: their own engines and Git caches, polling at the same moment.
    other = Context(
        settings=ctx.settings,
        db=type(ctx.db)(ctx.settings.database_url),
        keyring=ctx.keyring,
        pubsub=ctx.pubsub,
    )
    try:
        first, second = await asyncio.gather(
            poll_once(ctx, cache_of(ctx)),
            poll_once(other, type(cache_of(ctx))(ctx.settings.data_dir / "other-cache")),
        )
    finally:
        await other.db.dispose()

    started = [run for outcome in first + second for run in outcome.runs]
    runs = await runs_of(client, tenant, "net")
    assert len(started) == 1
    assert [(r["id"], r["trigger"]["commit"]) for r in runs] == [(started[0], head)]


async def test_one_replica_takes_each_poll_interval(ctx: Context, tenant: Tenant) -> None:
    assert await claim_poll(ctx, 60, "replica-a") is True
    assert await claim_poll(ctx, 60, "replica-b") is False
    async with ctx.db.read() as session:
        lease = await session.get(GitPollLease, "git-poll")
    assert lease is not None and lease.holder == "replica-a"


async def test_the_poll_loop_starts_the_run_within_one_interval(
    ctx: Context, client: httpx.AsyncClient, tenant: Tenant, origin: tuple[Path, str]
) -> None:
    work, url = origin
    await triggered_stack(client, tenant, url)
    poller = GitPoller(ctx, cache_of(ctx), interval=0.5)
    await poller.start()
    try:
        head = commit_files(work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change infra")
        push(work, url, token=TOKEN)
        # The interval is 0.5 s: 10 s is twenty of them.
        runs = await until(lambda: runs_of(client, tenant, "net"), 10, "the poll to start a run")
    finally:
        await poller.stop()
    assert [r["trigger"]["commit"] for r in runs] == [head]


async def test_superseding_leaves_the_newest_queued_push_run_and_never_touches_a_started_one(
    ctx: Context, client: httpx.AsyncClient, tenant: Tenant, origin: tuple[Path, str]
) -> None:
    work, url = origin
    await triggered_stack(client, tenant, url)

    commit_files(work, {"infra/main.tf": MAIN_TF + "# 1\n"}, "One")
    push(work, url, token=TOKEN)
    [first] = (await poll_once(ctx, cache_of(ctx)))[0].runs
    [launch] = await dispatch.claim_plans(ctx)  # the first run starts planning
    assert launch.run_id == first
    heads = []
    for n in (2, 3, 4):
        heads.append(commit_files(work, {"infra/main.tf": MAIN_TF + f"# {n}\n"}, f"Push {n}"))
        push(work, url, token=TOKEN)
        await poll_once(ctx, cache_of(ctx))

    runs = {r["trigger"]["commit"]: r for r in await runs_of(client, tenant, "net")}
    statuses = [(r["status"], r["trigger"]["commit"]) for r in runs.values() if r["id"] != first]
    assert sorted(statuses) == sorted([("canceled", heads[0]), ("canceled", heads[1]), ("queued", heads[2])])
    planning = [r for r in runs.values() if r["id"] == first]
    assert planning[0]["status"] == "planning"
    run = (
        await client.get(f"/api/v1/orgs/{tenant.org}/runs/{runs[heads[0]]['id']}", headers=tenant.headers)
    ).json()
    assert run["error"] == f"superseded by {heads[1][:7]}"


async def test_file_urls_and_a_force_push_to_an_unrelated_history_are_followed(
    ctx: Context, client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path
) -> None:
    url = make_bare(tmp_path / "bare")
    work = tmp_path / "w"
    make_repo(work, {"main.tf": MAIN_TF})
    push(work, url)
    await create_stack(client, tenant, slug="root", repository=url, trigger="plan")

    other = tmp_path / "w2"
    head = make_repo(other, {"main.tf": MAIN_TF + "# rewritten\n"}, message="Rewritten history")[1]
    push(other, url, force=True)
    [outcome] = await poll_once(ctx, cache_of(ctx))

    assert len(outcome.runs) == 1
    [run] = await runs_of(client, tenant, "root")
    assert run["trigger"]["commit"] == head


async def test_a_delivery_id_is_claimed_once_even_by_concurrent_handlers(
    ctx: Context, client: httpx.AsyncClient, tenant: Tenant, origin: tuple[Path, str]
) -> None:
    from firstlume.services.git.polling import triggered_stacks
    from firstlume.services.git.pushes import Sighting, handle

    work, url = origin
    await triggered_stack(client, tenant, url)
    head = commit_files(work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change infra")
    push(work, url, token=TOKEN)
    [stack] = await triggered_stacks(ctx)
    sighting = Sighting(
        org_id=stack.org_id, repository=url, branch="main", head=head, source="webhook:github", delivery="d-1"
    )

    # Both got past the replay check: the delivery row's unique key decides.
    outcomes = await asyncio.gather(
        handle(ctx, cache_of(ctx), sighting, [stack]), handle(ctx, cache_of(ctx), sighting, [stack])
    )

    assert sorted(o.duplicate for o in outcomes) == [False, True]
    [run] = await runs_of(client, tenant, "net")
    assert [o.runs for o in outcomes if not o.duplicate] == [[run["id"]]]


async def test_switching_the_trigger_on_by_patch_takes_the_current_head_as_baseline(
    ctx: Context, client: httpx.AsyncClient, tenant: Tenant, origin: tuple[Path, str]
) -> None:
    work, url = origin
    o = f"/api/v1/orgs/{tenant.org}"
    await create_stack(client, tenant, slug="net", repository=url, path="infra", git_https_token=TOKEN)
    commit_files(work, {"infra/main.tf": MAIN_TF + "# before\n"}, "Before the trigger")
    push(work, url, token=TOKEN)
    assert await poll_once(ctx, cache_of(ctx)) == []  # manual stacks are not polled

    patched = await client.patch(f"{o}/stacks/net", json={"trigger": "apply"}, headers=tenant.headers)
    assert patched.status_code == 200, patched.text
    assert patched.json()["trigger"] == "apply"
    assert await poll_once(ctx, cache_of(ctx)) == []  # the commit before the switch starts nothing

    head = commit_files(work, {"infra/main.tf": MAIN_TF + "# after\n"}, "After the trigger")
    push(work, url, token=TOKEN)
    [outcome] = await poll_once(ctx, cache_of(ctx))
    [run] = await runs_of(client, tenant, "net")
    assert outcome.runs == [run["id"]]
    assert (run["type"], run["trigger"]["commit"]) == ("apply", head)

    refusals = [
        ({"trigger": "sometimes"}, "trigger"),
        ({"trigger": None}, None),
        ({"colour": "red"}, None),
        ({}, None),
        ({"path": "../up"}, "path"),
    ]
    for body, field in refusals:
        response = await client.patch(f"{o}/stacks/net", json=body, headers=tenant.headers)
        assert response.status_code == 422, (body, response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid_request" and error["message"], body
        if field:
            assert error.get("field") == field, (body, error)
    missing = await client.patch(f"{o}/stacks/nope", json={"trigger": "plan"}, headers=tenant.headers)
    assert missing.status_code == 404
    stack = (await client.get(f"{o}/stacks/net", headers=tenant.headers)).json()
    assert (stack["trigger"], stack["path"]) == ("apply", "infra")


async def test_a_poll_that_finds_a_stack_without_its_baseline_takes_it_silently(
    ctx: Context, client: httpx.AsyncClient, tenant: Tenant, origin: tuple[Path, str]
) -> None:
    # Between a stack's creation and its baseline (read from the server just after), a poll of
    # another replica may see it first: the head becomes the baseline, as the creation would have
    # made it, and no delivery is logged for it. The next commit is logged and starts a run.
    from sqlalchemy import update

    from firstlume.db.models import Stack

    work, url = origin
    await triggered_stack(client, tenant, url)
    async with ctx.unit() as unit:
        await unit.session.execute(update(Stack).values(git_seen_commit=None))
    [outcome] = await poll_once(ctx, cache_of(ctx))
    assert outcome.runs == [] and "it is the baseline" in outcome.ignored[0]["reason"]

    async def deliveries() -> list[dict[str, Any]]:
        answer = await client.get(f"/api/v1/orgs/{tenant.org}/git/deliveries", headers=tenant.headers)
        return answer.json()["deliveries"]  # type: ignore[no-any-return]

    assert await deliveries() == []
    assert await poll_once(ctx, cache_of(ctx)) == []  # the baseline is taken: nothing moves

    head = commit_files(work, {"infra/main.tf": MAIN_TF + "# v2\n"}, "Change infra")
    push(work, url, token=TOKEN)
    [outcome] = await poll_once(ctx, cache_of(ctx))
    [run] = await runs_of(client, tenant, "net")
    assert outcome.runs == [run["id"]] and run["trigger"]["commit"] == head
    assert [d["head"] for d in await deliveries()] == [head]
