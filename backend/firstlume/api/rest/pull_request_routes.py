"""Pull requests over REST: the organization's Git hosts (where statuses and comments go; the
token is write-only) and its pull requests with their proposed runs."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume.api.json_body import JSONResponse
from firstlume.api.rest.http import context_of, endpoint, json_body
from firstlume.api.rest.org_routes import org_read, org_request
from firstlume.api.rest.serializers import iso
from firstlume.api.validation import command
from firstlume.domain.errors import InvalidRequest
from firstlume.services.commands import PutGitHost
from firstlume.services.git import hosts
from firstlume.services.reads import pull_requests as reads

MAX_HOST = 255


def host_json(host: hosts.HostRecord) -> dict[str, Any]:
    return {
        "host": host.host,
        "kind": host.kind.value,
        "api_url": host.api_url,
        "token_set": True,
        "updated_at": iso(host.updated_at),
    }


def _host_name(request: Request) -> str:
    name: str = request.path_params["host"]
    if not name.strip() or len(name) > MAX_HOST or "/" in name or any(c.isspace() for c in name):
        raise InvalidRequest(
            "The host must be a Git host's name as in its repository URLs, such as github.com.", field="host"
        )
    return name


@endpoint
async def put_git_host(request: Request) -> Response:
    body = await json_body(request)
    ctx = context_of(request)
    name = _host_name(request)
    async with org_request(request) as (unit, _, org):
        host = await hosts.put_host(unit.session, ctx.keyring, org, name, command(PutGitHost, body))
    return JSONResponse(host_json(host))


@endpoint
async def list_git_hosts(request: Request) -> Response:
    async with org_read(request) as (session, _, org):
        found = await hosts.list_hosts(session, org.id)
    return JSONResponse({"hosts": [host_json(h) for h in found]})


def proposed_run_json(run: reads.ProposedRunSummary) -> dict[str, Any]:
    return {
        "id": run.id,
        "number": run.number,
        "stack": run.stack,
        "status": run.status,
        "proposed": True,
        "head_sha": run.head_sha,
        "created_at": iso(run.created_at),
        "error": run.error,
        "summary": run.summary,
    }


def pull_request_json(pull: reads.PullRequestRecord) -> dict[str, Any]:
    return {
        "repository": pull.repository,
        "number": pull.number,
        "url": pull.url,
        "title": pull.title,
        "author": pull.author,
        "head_sha": pull.head_sha,
        "base_branch": pull.base_branch,
        "state": pull.state,
        "updated_at": iso(pull.updated_at),
        "runs": [proposed_run_json(run) for run in pull.runs],
    }


@endpoint
async def list_pull_requests(request: Request) -> Response:
    async with org_read(request, "state", "stack") as (session, _, org):
        state = request.query_params.get("state")
        if state is not None and state not in ("open", "closed"):
            raise InvalidRequest("'state' must be open or closed.", field="state")
        stack = request.query_params.get("stack") or None
        found = await reads.pull_requests(session, org.id, state=state, stack_slug=stack)
    return JSONResponse({"pull_requests": [pull_request_json(p) for p in found]})


def feedback_json(item: reads.FeedbackRecord) -> dict[str, Any]:
    return {
        "id": str(item.id),
        "kind": item.kind,
        "repository": item.repository,
        "pull_request": item.number,
        "run": item.run_id,
        "status": item.payload if item.kind == "status" else None,
        "created_at": iso(item.created_at),
        "attempts": item.attempts,
        "delivered_at": iso(item.delivered_at),
        "given_up_at": iso(item.given_up_at),
        "next_attempt_at": None if item.delivered_at or item.given_up_at else iso(item.next_attempt_at),
        "answers": item.attempts_log,
    }


O = "/api/v1/orgs/{org}"

routes = [
    Route(f"{O}/git/hosts/{{host}}", put_git_host, name="git.hosts.put", methods=["PUT"]),
    Route(f"{O}/git/hosts", list_git_hosts, name="git.hosts.list", methods=["GET"]),
    Route(f"{O}/pull-requests", list_pull_requests, name="pull_requests.list", methods=["GET"]),
]
