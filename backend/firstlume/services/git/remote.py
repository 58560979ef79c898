"""Talking to Git servers with pygit2 (never a `git` subprocess): a branch's head without a
clone (ls-remote), a fetch of one branch into a bare cache, and the files two commits differ in.

Every function blocks: callers run them in a thread (asyncio.to_thread).
"""

from __future__ import annotations

import fcntl
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pygit2
from pygit2.enums import CredentialType

from firstlume.executor.checkout import HTTPS_TOKEN_USER, display_url

CONFIG_FILE_NAME = "config.yaml"


class RemoteError(Exception):
    """The server could not be asked; the message names the repository without credentials."""


@dataclass(frozen=True)
class Credentials:
    https_token: str | None = None
    ssh_private_key: str | None = None


@dataclass(frozen=True)
class Change:
    """What a new head brings: the files changed since the old one (None when the old commit is
    unknown, so everything counts), its author's email, and config.yaml at the stack path."""

    paths: list[str] | None
    author_email: str
    # The new head is an ancestor of the old one: an older push arriving late.
    behind: bool
    config_text: str | None


class _Callbacks(pygit2.RemoteCallbacks):
    def __init__(self, credentials: Credentials) -> None:
        super().__init__()
        self._credentials = credentials
        self._asked = False

    def credentials(
        self, url: str, username_from_url: str | None, allowed_types: CredentialType
    ) -> pygit2.UserPass | pygit2.KeypairFromMemory:
        # libgit2 asks again after a refusal; answering the same would loop forever.
        if self._asked:
            raise RemoteError("the repository refused the credentials")
        self._asked = True
        token, key = self._credentials.https_token, self._credentials.ssh_private_key
        if allowed_types & CredentialType.USERPASS_PLAINTEXT and token:
            return pygit2.UserPass(username_from_url or HTTPS_TOKEN_USER, token)
        if allowed_types & (CredentialType.SSH_KEY | CredentialType.SSH_MEMORY) and key:
            return pygit2.KeypairFromMemory(username_from_url or "git", None, key, "")
        raise RemoteError("the repository asks for credentials and the stack has none of the kind it accepts")


class GitCache:
    """Bare repositories under `root`, one per organization and repository URL, which fetches
    fill. A file lock serializes the processes and threads that use one."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @contextmanager
    def repository(self, org_id: str, url: str) -> Iterator[pygit2.Repository]:
        key = hashlib.sha256(f"{org_id}\n{url}".encode()).hexdigest()[:32]
        path = self.root / key
        path.mkdir(parents=True, exist_ok=True)
        with (path.parent / f"{key}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if (path / "HEAD").exists():
                    yield pygit2.Repository(str(path))
                else:
                    yield pygit2.init_repository(str(path), bare=True)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _failure(url: str, error: Exception) -> RemoteError:
    if isinstance(error, RemoteError):
        return RemoteError(f"{display_url(url)}: {error}")
    return RemoteError(f"{display_url(url)}: {error}".replace(url, display_url(url)))


def branch_heads(cache: GitCache, org_id: str, url: str, credentials: Credentials) -> dict[str, str]:
    """Every branch of `url` and its head, as ls-remote lists them: nothing is downloaded."""
    with cache.repository(org_id, url) as repo:
        remote = repo.remotes.create_anonymous(url)
        try:
            heads = remote.list_heads(callbacks=_Callbacks(credentials))
        except (pygit2.GitError, RemoteError, KeyError, ValueError, OSError) as error:
            raise _failure(url, error) from None
    prefix = "refs/heads/"
    return {
        name[len(prefix) :]: str(head.oid) for head in heads if (name := head.name or "").startswith(prefix)
    }


def fetch_change(
    cache: GitCache,
    org_id: str,
    url: str,
    credentials: Credentials,
    *,
    branch: str,
    old: str | None,
    new: str,
    stack_path: str,
) -> Change:
    """Fetches `branch` (unless `new` is already there) and diffs `old` against `new`."""
    with cache.repository(org_id, url) as repo:
        if _commit(repo, new) is None:
            remote = repo.remotes.create_anonymous(url)
            refspec = f"+refs/heads/{branch}:refs/firstlume/heads/{branch}"
            try:
                remote.fetch([refspec], callbacks=_Callbacks(credentials))
            except (pygit2.GitError, RemoteError, KeyError, ValueError, OSError) as error:
                raise _failure(url, error) from None
        commit = _commit(repo, new)
        if commit is None:
            # The branch moved on again since the head was read: the newer head comes next.
            raise RemoteError(f"{display_url(url)}: commit {new} is not on {branch} any more")
        before = _commit(repo, old) if old else None
        paths = None if before is None else _changed_paths(repo, before, commit)
        return Change(
            paths=paths,
            behind=before is not None and before.id != commit.id and repo.descendant_of(before.id, commit.id),
            author_email=commit.author.email,
            config_text=_read_text(commit, _config_path(stack_path)),
        )


def _commit(repo: pygit2.Repository, sha: str | None) -> pygit2.Commit | None:
    if not sha:
        return None
    try:
        found = repo.get(sha)
    except (ValueError, KeyError, pygit2.GitError):
        return None
    return found if isinstance(found, pygit2.Commit) else None


def _changed_paths(repo: pygit2.Repository, old: pygit2.Commit, new: pygit2.Commit) -> list[str]:
    diff = old.tree.diff_to_tree(new.tree)
    paths: set[str] = set()
    for delta in diff.deltas:
        paths.add(delta.old_file.path)
        paths.add(delta.new_file.path)
    return sorted(paths)


def _config_path(stack_path: str) -> str:
    return CONFIG_FILE_NAME if stack_path in ("", ".") else str(PurePosixPath(stack_path) / CONFIG_FILE_NAME)


def _read_text(commit: pygit2.Commit, path: str) -> str | None:
    try:
        entry = commit.tree[path]
    except KeyError:
        return None
    blob = entry if isinstance(entry, pygit2.Blob) else None
    if blob is None:
        return None
    try:
        return blob.data.decode("utf-8")
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True)
class ProposedChange:
    """What a pull request's head changes: the files changed between the merge base (with the
    base branch) and the head, the head's author, and config.yaml at the stack path in the head."""

    paths: list[str]
    author_email: str
    config_text: str | None


def fetch_pull_request(
    cache: GitCache,
    org_id: str,
    url: str,
    credentials: Credentials,
    *,
    base_branch: str,
    head_ref: str,
    head: str,
    stack_path: str,
) -> ProposedChange:
    """Fetches the base branch and the pull request's head ref (refs/pull/<n>/head,
    refs/merge-requests/<n>/head or the head branch) and diffs the head against its merge base."""
    with cache.repository(org_id, url) as repo:
        remote = repo.remotes.create_anonymous(url)
        refspecs = [
            f"+refs/heads/{base_branch}:refs/firstlume/heads/{base_branch}",
            f"+{head_ref}:refs/firstlume/proposed/{hashlib.sha256(head_ref.encode()).hexdigest()[:16]}",
        ]
        try:
            remote.fetch(refspecs, callbacks=_Callbacks(credentials))
        except (pygit2.GitError, RemoteError, KeyError, ValueError, OSError) as error:
            raise _failure(url, error) from None
        commit = _commit(repo, head)
        if commit is None:
            raise RemoteError(
                f"{display_url(url)}: commit {head} is not at {head_ref} (a newer head comes next)"
            )
        base_ref = repo.references.get(f"refs/firstlume/heads/{base_branch}")
        base = _commit(repo, str(base_ref.target)) if base_ref is not None else None
        if base is None:
            raise RemoteError(f"{display_url(url)}: the base branch {base_branch!r} does not exist")
        merge_base = repo.merge_base(base.id, commit.id)
        ancestor = _commit(repo, str(merge_base)) if merge_base is not None else None
        paths = _changed_paths(repo, ancestor, commit) if ancestor is not None else _all_paths(commit)
        return ProposedChange(
            paths=paths,
            author_email=commit.author.email,
            config_text=_read_text(commit, _config_path(stack_path)),
        )


def _all_paths(commit: pygit2.Commit) -> list[str]:
    """Every file of a head with no common history with its base: all of it is new."""
    paths: list[str] = []

    def walk(tree: pygit2.Tree, prefix: str) -> None:
        for entry in tree:
            name = f"{prefix}{entry.name}"
            if isinstance(entry, pygit2.Tree):
                walk(entry, name + "/")
            else:
                paths.append(name)

    walk(commit.tree, "")
    return sorted(paths)
