"""Real Git repositories for tests, built with pygit2 in a temporary directory.

    url, sha = make_repo(tmp_path / "repo", {"infra/main.tf": "..."})
    sha2 = commit_files(tmp_path / "repo", {"infra/main.tf": "...", "old.tf": None}, "Change it")

`url` is a file:// URL that the executor clones like any remote.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pygit2
import pytest

DEFAULT_AUTHOR = ("Ada Lovelace", "ada@example.com")

# What `checkout` is asked for: a plan takes a branch's tip (a clone), an apply one commit (a
# fetch, then that commit's tree). Tests of both take `by_commit` and pass `**checkout_of(...)`.
BY_BRANCH_OR_COMMIT = pytest.mark.parametrize("by_commit", [False, True], ids=["branch", "commit"])


def checkout_of(by_commit: bool, sha: str = "a" * 40) -> dict[str, str]:
    """`checkout`'s keyword for the branch `main`, or for commit `sha` (any, if it need not exist)."""
    return {"sha": sha} if by_commit else {"branch": "main"}


def make_repo(
    path: Path,
    files: Mapping[str, str],
    *,
    branch: str = "main",
    message: str = "Initial commit",
    author: tuple[str, str] = DEFAULT_AUTHOR,
) -> tuple[str, str]:
    """Creates a non-bare repository at `path` with one commit of `files` on `branch`."""
    path.mkdir(parents=True, exist_ok=True)
    pygit2.init_repository(str(path), initial_head=branch)
    sha = commit_files(path, files, message, author=author)
    return path.resolve().as_uri(), sha


def commit_files(
    path: Path,
    files: Mapping[str, str | None],
    message: str,
    *,
    author: tuple[str, str] = DEFAULT_AUTHOR,
    branch: str | None = None,
) -> str:
    """Writes (or, for None, deletes) `files` and commits them on the current branch, or on
    `branch` (created from the current HEAD if missing). Returns the new commit's SHA."""
    repo = pygit2.Repository(str(path))
    if branch is not None:
        ref = f"refs/heads/{branch}"
        if ref not in repo.references and not repo.head_is_unborn:
            repo.branches.local.create(branch, repo.head.peel(pygit2.Commit))
        repo.set_head(ref)
        if not repo.head_is_unborn:
            repo.checkout_head(strategy=pygit2.enums.CheckoutStrategy.FORCE)
    for name, content in files.items():
        target = path / name
        if content is None:
            target.unlink(missing_ok=True)
            if name in repo.index:
                repo.index.remove(name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    signature = pygit2.Signature(*author)
    parents = [] if repo.head_is_unborn else [repo.head.target]
    oid = repo.create_commit("HEAD", signature, signature, message, tree, parents)
    return str(oid)


def push(
    path: Path, url: str, *, branch: str = "main", token: str | None = None, force: bool = False
) -> None:
    """Pushes `branch` of the repository at `path` to `url` with pygit2 (smart HTTP or file://)."""
    repo = pygit2.Repository(str(path))
    name = "firstlume-test-origin"
    if name in repo.remotes.names():
        repo.remotes.set_url(name, url)
    else:
        repo.remotes.create(name, url)
    callbacks = None
    if token is not None:
        callbacks = pygit2.RemoteCallbacks(credentials=pygit2.UserPass("x-access-token", token))
    spec = f"{'+' if force else ''}refs/heads/{branch}:refs/heads/{branch}"
    repo.remotes[name].push([spec], callbacks=callbacks)


def make_bare(path: Path) -> str:
    """An empty bare repository (a server's side) at `path`; returns its file:// URL."""
    pygit2.init_repository(str(path), bare=True, initial_head="main")
    return path.resolve().as_uri()
