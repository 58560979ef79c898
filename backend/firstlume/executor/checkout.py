"""Git checkout with pygit2: the tip of a branch for a plan, exactly one commit for an apply."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pygit2
from pygit2.enums import CheckoutStrategy, CredentialType

HTTPS_TOKEN_USER = "x-access-token"
_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/]+)@)?(?P<host>[^:/]+):(?P<path>(?!//).+)$")
_FULL_SHA = re.compile(r"^[0-9a-fA-F]{40}$")


class CheckoutError(Exception):
    """The checkout failed; the message is meant for the run's error and holds no credential."""


@dataclass(frozen=True)
class GitAuth:
    https_token: str | None = None
    ssh_private_key: str | None = None


@dataclass(frozen=True)
class Commit:
    sha: str
    author: str  # "Name <email>"
    message: str  # first line
    url: str | None  # browsable link for hosted Git


def display_url(repository: str) -> str:
    """The repository URL without any user or password, for logs and messages."""
    if _SCP_LIKE.match(repository) and "://" not in repository:
        return repository
    parts = urlsplit(repository)
    if parts.username is None and parts.password is None:
        return repository
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def commit_url(repository: str, sha: str) -> str | None:
    """`<web base>/commit/<sha>` (GitHub), `/-/commit/` (GitLab), `/commits/` (Bitbucket)."""
    scp = _SCP_LIKE.match(repository) if "://" not in repository else None
    if scp:
        scheme, host, path = "https", scp["host"], scp["path"]
    else:
        parts = urlsplit(repository)
        if parts.scheme not in ("http", "https", "ssh", "git", "git+ssh", "ssh+git"):
            return None
        scheme = parts.scheme if parts.scheme in ("http", "https") else "https"
        host = parts.hostname or ""
        if parts.scheme in ("http", "https") and parts.port:
            host += f":{parts.port}"
        path = parts.path
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    hostname = host.split(":")[0].lower()
    if not path or not hostname:
        return None
    base = f"{scheme}://{host}/{path}"
    if "github" in hostname:
        return f"{base}/commit/{sha}"
    if "gitlab" in hostname:
        return f"{base}/-/commit/{sha}"
    if "bitbucket" in hostname:
        return f"{base}/commits/{sha}"
    return None


# A checkout as a whole may take this many times FIRSTLUME_GIT_TIMEOUT: a large repository
# keeps answering (each read within the timeout) yet must not hold the stack for ever.
OVERALL_FACTOR = 10


class _Callbacks(pygit2.RemoteCallbacks):
    def __init__(self, auth: GitAuth, deadline: float | None = None, step: str = "") -> None:
        super().__init__()
        self._auth = auth
        self.attempts = 0
        self.deadline = deadline
        self.step = step
        self.overall = 0.0

    def _check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise CheckoutError(
                f"{self.step} took longer than {self.overall:g} seconds, the limit of a checkout"
            )

    def transfer_progress(self, stats: Any) -> None:
        self._check_deadline()

    def sideband_progress(self, string: str) -> None:
        self._check_deadline()

    def credentials(
        self, url: str, username_from_url: str | None, allowed_types: CredentialType
    ) -> pygit2.UserPass | pygit2.KeypairFromMemory:
        self.attempts += 1
        if self.attempts > 1:
            # libgit2 asks again after a refusal; answering the same would loop forever.
            raise CheckoutError("the repository refused the credentials")
        if allowed_types & CredentialType.USERPASS_PLAINTEXT and self._auth.https_token:
            return pygit2.UserPass(username_from_url or HTTPS_TOKEN_USER, self._auth.https_token)
        key = self._auth.ssh_private_key
        if allowed_types & (CredentialType.SSH_KEY | CredentialType.SSH_MEMORY) and key:
            return pygit2.KeypairFromMemory(username_from_url or "git", None, key, "")
        raise CheckoutError(
            "the repository asks for credentials and the stack has none of the kind it accepts"
        )


def checkout(
    repository: str,
    dest: Path,
    *,
    branch: str | None = None,
    sha: str | None = None,
    auth: GitAuth | None = None,
    timeout: float = 120.0,
    commit_ref: str | None = None,
) -> Commit:
    """Clones `repository` into `dest` and checks out `sha` exactly, else the tip of `branch`.
    `commit_ref` is a ref outside the branches that holds `sha` (a pull request's head ref).
    Each network wait (connecting, every read) may last `timeout` seconds and the checkout as a
    whole OVERALL_FACTOR times that; past either, CheckoutError names the step that hung."""
    where = display_url(repository)
    _network_timeouts(timeout)
    callbacks = _Callbacks(auth or GitAuth(), time.monotonic() + OVERALL_FACTOR * timeout, f"cloning {where}")
    callbacks.overall = OVERALL_FACTOR * timeout
    try:
        if sha:
            repo = _fetched(repository, dest, callbacks)
        else:
            repo = pygit2.clone_repository(repository, str(dest), checkout_branch=branch, callbacks=callbacks)
    except CheckoutError as exc:
        if str(exc).startswith("checkout: "):
            raise
        raise CheckoutError(f"cannot clone {where}: {exc}") from None
    except (pygit2.GitError, KeyError, ValueError) as exc:
        if branch and not sha and "reference" in str(exc) and "not found" in str(exc):
            raise CheckoutError(f"branch {branch!r} does not exist in {where}") from None
        if _timed_out(exc):
            raise CheckoutError(_no_answer(f"cloning {where}", timeout)) from None
        raise CheckoutError(f"cannot clone {where}: {_clean(str(exc), repository)}") from None
    if sha:
        callbacks.step = f"fetching commit {sha} from {where}"
        commit = _find_commit(repo, sha, callbacks, timeout, commit_ref)
        if commit is None:
            raise CheckoutError(
                f"commit {sha} is not in {where} (was it removed by a force push?); plan again"
            )
        repo.checkout_tree(  # type: ignore[no-untyped-call]  # pygit2 leaves it unannotated
            commit, strategy=CheckoutStrategy.FORCE | CheckoutStrategy.REMOVE_UNTRACKED
        )
        repo.set_head(commit.id)
    else:
        head = repo.head.peel(pygit2.Commit)
        commit = head
    return Commit(
        sha=str(commit.id),
        author=f"{commit.author.name} <{commit.author.email}>",
        message=(commit.message.strip().splitlines() or [""])[0].strip(),
        url=commit_url(repository, str(commit.id)),
    )


def _fetched(repository: str, dest: Path, callbacks: _Callbacks) -> pygit2.Repository:
    """A clone without its working tree: the commit asked for is written once, where a clone
    would first write the default branch's tree and then the commit's over it."""
    repo = pygit2.init_repository(str(dest))
    repo.remotes.create("origin", repository)
    repo.remotes["origin"].fetch(callbacks=callbacks)
    return repo


def _network_timeouts(timeout: float) -> None:
    # libgit2's own limits, process-wide (an executor checks out one repository at a time):
    # connecting, and each read or write of the HTTP and SSH transports.
    milliseconds = max(1, int(timeout * 1000))
    pygit2.settings.server_connect_timeout = milliseconds
    pygit2.settings.server_timeout = milliseconds


def _timed_out(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "timed out" in text or "timeout" in text


def _no_answer(step: str, timeout: float) -> str:
    return f"checkout: {step} got no answer within {timeout:g} seconds (FIRSTLUME_GIT_TIMEOUT)"


def _find_commit(
    repo: pygit2.Repository, sha: str, callbacks: _Callbacks, timeout: float, commit_ref: str | None = None
) -> pygit2.Commit | None:
    commit = _lookup(repo, sha)
    if commit is None and commit_ref is not None:
        # A pull request's head lives under its own ref (refs/pull/<n>/head, ...): fetch that.
        callbacks.attempts = 0
        try:
            repo.remotes["origin"].fetch([f"+{commit_ref}:refs/firstlume/commit-ref"], callbacks=callbacks)
        except CheckoutError:
            raise
        except (pygit2.GitError, KeyError) as exc:
            if _timed_out(exc):
                raise CheckoutError(_no_answer(callbacks.step, timeout)) from None
        commit = _lookup(repo, sha)
    if commit is None and _FULL_SHA.match(sha):
        # A commit reachable from no branch (a pull request's head, say): servers that allow
        # fetching by id hand it over.
        callbacks.attempts = 0
        try:
            repo.remotes["origin"].fetch([sha], callbacks=callbacks)
        except CheckoutError:
            raise
        except (pygit2.GitError, KeyError) as exc:
            if _timed_out(exc):
                raise CheckoutError(_no_answer(callbacks.step, timeout)) from None
            return None
        commit = _lookup(repo, sha)
    return commit


def _lookup(repo: pygit2.Repository, sha: str) -> pygit2.Commit | None:
    try:
        obj = repo.revparse_single(sha) if not _FULL_SHA.match(sha) else repo.get(sha)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    if obj is None:
        return None
    try:
        return obj.peel(pygit2.Commit)
    except (pygit2.GitError, ValueError):
        return None


def _clean(message: str, repository: str) -> str:
    return message.replace(repository, display_url(repository))
