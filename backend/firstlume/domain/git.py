"""Git-driven runs: what a stack does when its branch moves, and what a delivery came to."""

from __future__ import annotations

import re
from enum import StrEnum

from firstlume.domain.runs import RunType


class StackTrigger(StrEnum):
    """What a new commit on the stack's branch starts: nothing, a plan, or a run that applies."""

    MANUAL = "manual"
    PLAN = "plan"
    APPLY = "apply"

    @property
    def run_type(self) -> RunType | None:
        return {StackTrigger.PLAN: RunType.PLAN, StackTrigger.APPLY: RunType.APPLY}.get(self)


class PullRequestMode(StrEnum):
    """What a pull request against the stack's branch starts: nothing, or a proposed plan."""

    OFF = "off"
    PLAN = "plan"


class ForkPolicy(StrEnum):
    """The inherited setting `pull_requests_from_forks`: what a pull request from a fork (code
    from anyone) may run. Off by default."""

    OFF = "off"
    PLAN_WITHOUT_SECRETS = "plan_without_secrets"
    PLAN = "plan"


class Dialect(StrEnum):
    """The hosts whose push webhooks the organization's webhook URL understands."""

    GITHUB = "github"
    GITEA = "gitea"
    GITLAB = "gitlab"


ZERO_SHA = "0" * 40


def head_ref(dialect: str, number: int) -> str:
    """The ref a host keeps pull request `number`'s head at."""
    if dialect == Dialect.GITLAB:
        return f"refs/merge-requests/{number}/head"
    return f"refs/pull/{number}/head"


def short_sha(sha: str) -> str:
    return sha[:7]


def _glob_pattern(glob: str) -> re.Pattern[str]:
    """A `watch:` glob, relative to the repository's root: `*` and `?` stay within one path
    segment, `**` crosses segments (`**/` also matches no directory at all)."""
    glob = glob.strip().lstrip("/")
    parts: list[str] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            parts.append(".*")
            i += 2
        elif glob[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            parts.append("[^/]")
            i += 1
        else:
            parts.append(re.escape(glob[i]))
            i += 1
    # A glob without wildcards may name a directory: everything below it counts too.
    return re.compile("".join(parts) + r"(?:/.*)?\Z")


def touches_stack(paths: list[str] | None, stack_path: str, watch: list[str]) -> bool:
    """Whether a change to `paths` concerns a stack at `stack_path` that also watches `watch`.
    Unknown paths (None: the previous commit is gone) count as touching it."""
    if paths is None:
        return True
    prefix = stack_path.strip("/")
    patterns = [_glob_pattern(glob) for glob in watch if glob.strip()]
    for path in paths:
        if prefix in ("", ".") or path == prefix or path.startswith(prefix + "/"):
            return True
        if any(pattern.match(path) for pattern in patterns):
            return True
    return False


_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!//).+)$")


def normalize_repository(url: str) -> str:
    """A repository URL reduced to what names the repository: no scheme, user, `.git` suffix or
    trailing slash, the host in lower case. `https://GitHub.com/a/b.git`, `git@github.com:a/b`
    and `ssh://git@github.com/a/b/` are all `github.com/a/b`."""
    text = url.strip()
    if "://" not in text:
        scp = _SCP_LIKE.match(text)
        host, path = (scp["host"], scp["path"]) if scp else ("", text)
    else:
        scheme, _, rest = text.partition("://")
        authority, slash, path = rest.partition("/")
        host = authority.rpartition("@")[2]
        if scheme.lower() in ("ssh", "git+ssh", "ssh+git", "git"):
            host = host.split(":")[0]  # the SSH port is not part of the repository's name
        path = slash + path
    path = path.strip("/")
    while path.endswith(".git") or path.endswith("/"):
        path = path.removesuffix(".git").rstrip("/")
    return f"{host.lower()}/{path}" if host else "/" + path
