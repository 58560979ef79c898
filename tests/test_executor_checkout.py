"""Checkout with pygit2 against real repositories: file:// and a private smart-HTTP server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import CredentialType

from firstlume.executor.checkout import (
    CheckoutError,
    GitAuth,
    _Callbacks,
    checkout,
    commit_url,
    display_url,
)
from support.git_http import GitHttpServer
from support.git_repos import BY_BRANCH_OR_COMMIT, checkout_of, commit_files, make_repo

MAIN_TF = 'resource "terraform_data" "a" {}\n'


def test_plan_checkout_takes_the_tip_of_the_branch_with_its_commit_details(tmp_path: Path) -> None:
    url, _ = make_repo(tmp_path / "repo", {"infra/main.tf": MAIN_TF})
    tip = commit_files(
        tmp_path / "repo",
        {"infra/extra.tf": "# more\n"},
        "Add extra\n\nA body that is not the first line.",
        author=("Grace Hopper", "grace@example.com"),
    )

    commit = checkout(url, tmp_path / "work", branch="main")

    assert commit.sha == tip
    assert commit.author == "Grace Hopper <grace@example.com>"
    assert commit.message == "Add extra"
    assert commit.url is None  # a local repository has no browsable page
    assert (tmp_path / "work" / "infra" / "extra.tf").read_text() == "# more\n"


def test_plan_checkout_uses_the_named_branch_not_the_default_one(tmp_path: Path) -> None:
    url, main_sha = make_repo(tmp_path / "repo", {"main.tf": MAIN_TF})
    feature = commit_files(tmp_path / "repo", {"feature.tf": "# f\n"}, "Feature", branch="feature")
    commit_files(tmp_path / "repo", {}, "Back on main", branch="main")

    on_feature = checkout(url, tmp_path / "a", branch="feature")
    on_main = checkout(url, tmp_path / "b", branch="main")

    assert on_feature.sha == feature
    assert (tmp_path / "a" / "feature.tf").exists()
    assert on_main.sha != feature and on_main.sha != main_sha
    assert not (tmp_path / "b" / "feature.tf").exists()


def test_apply_checkout_takes_exactly_the_planned_commit_after_the_branch_moved(tmp_path: Path) -> None:
    url, planned = make_repo(tmp_path / "repo", {"main.tf": MAIN_TF, "old.tf": "# old\n"})
    commit_files(tmp_path / "repo", {"old.tf": None, "new.tf": "# new\n"}, "Move on")

    commit = checkout(url, tmp_path / "work", sha=planned)

    assert commit.sha == planned
    assert commit.message == "Initial commit"
    assert (tmp_path / "work" / "old.tf").exists()
    assert not (tmp_path / "work" / "new.tf").exists()
    assert str(pygit2.Repository(str(tmp_path / "work")).head.target) == planned


def test_apply_checkout_fails_clearly_when_the_commit_is_gone(tmp_path: Path) -> None:
    url, _ = make_repo(tmp_path / "repo", {"main.tf": MAIN_TF})
    missing = "0123456789abcdef0123456789abcdef01234567"

    with pytest.raises(CheckoutError, match=f"commit {missing} is not in {url}"):
        checkout(url, tmp_path / "work", sha=missing)


def test_plan_checkout_fails_clearly_when_the_branch_does_not_exist(tmp_path: Path) -> None:
    url, _ = make_repo(tmp_path / "repo", {"main.tf": MAIN_TF})

    with pytest.raises(CheckoutError, match="branch 'release' does not exist"):
        checkout(url, tmp_path / "work", branch="release")


@BY_BRANCH_OR_COMMIT
def test_checkout_of_a_missing_repository_names_it(tmp_path: Path, by_commit: bool) -> None:
    url = (tmp_path / "nowhere").as_uri()

    with pytest.raises(CheckoutError, match=f"cannot clone {url}"):
        checkout(url, tmp_path / "work", **checkout_of(by_commit))


@pytest.mark.parametrize(
    ("repository", "expected"),
    [
        ("https://github.com/acme/infra.git", "https://github.com/acme/infra/commit/abc"),
        ("https://github.com/acme/infra", "https://github.com/acme/infra/commit/abc"),
        ("git@github.com:acme/infra.git", "https://github.com/acme/infra/commit/abc"),
        ("ssh://git@github.com/acme/infra.git", "https://github.com/acme/infra/commit/abc"),
        (
            "ssh://git@gitlab.example.com:2222/group/sub/infra.git",
            "https://gitlab.example.com/group/sub/infra/-/commit/abc",
        ),
        ("https://gitlab.com/group/infra.git", "https://gitlab.com/group/infra/-/commit/abc"),
        ("git@bitbucket.org:team/infra.git", "https://bitbucket.org/team/infra/commits/abc"),
        (
            "https://x-access-token:s3cret@github.com/acme/infra.git",
            "https://github.com/acme/infra/commit/abc",
        ),
        ("file:///srv/git/infra", None),
        ("https://git.example.com/acme/infra.git", None),
        ("/srv/git/infra", None),
    ],
)
def test_commit_url_is_browsable_for_hosted_git_only(repository: str, expected: str | None) -> None:
    assert commit_url(repository, "abc") == expected


def test_display_url_never_shows_credentials() -> None:
    assert display_url("https://user:s3cret@github.com/acme/infra.git") == "https://github.com/acme/infra.git"
    assert display_url("git@github.com:acme/infra.git") == "git@github.com:acme/infra.git"


def test_ssh_key_is_offered_from_memory_as_the_url_user() -> None:
    callbacks = _Callbacks(GitAuth(ssh_private_key="-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n"))

    credential = callbacks.credentials("ssh://git@host/r.git", "git", CredentialType.SSH_KEY)

    assert isinstance(credential, pygit2.KeypairFromMemory)
    assert credential.credential_tuple == ("git", None, "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n", "")


def test_credentials_are_offered_once_then_refused_instead_of_looping() -> None:
    callbacks = _Callbacks(GitAuth(https_token="tok"))
    callbacks.credentials("https://host/r.git", None, CredentialType.USERPASS_PLAINTEXT)

    with pytest.raises(CheckoutError, match="refused the credentials"):
        callbacks.credentials("https://host/r.git", None, CredentialType.USERPASS_PLAINTEXT)


# -- a private repository over smart HTTP (git http-backend behind Basic auth) -----------------


@pytest.fixture
def private_repo(tmp_path: Path) -> Iterator[tuple[GitHttpServer, str, str]]:
    _, sha = make_repo(tmp_path / "srv" / "infra", {"main.tf": MAIN_TF})
    with GitHttpServer(tmp_path / "srv", token="ghp_right_token").running() as server:
        yield server, server.url("infra"), sha


@BY_BRANCH_OR_COMMIT
def test_private_repository_is_cloned_with_the_https_token(
    private_repo: tuple[GitHttpServer, str, str], tmp_path: Path, by_commit: bool
) -> None:
    server, url, sha = private_repo

    commit = checkout(
        url, tmp_path / "work", **checkout_of(by_commit, sha), auth=GitAuth(https_token="ghp_right_token")
    )

    assert commit.sha == sha
    assert server.expected_authorization in server.authorizations
    assert (tmp_path / "work" / "main.tf").exists()


@BY_BRANCH_OR_COMMIT
def test_wrong_https_token_fails_without_revealing_it(
    private_repo: tuple[GitHttpServer, str, str], tmp_path: Path, by_commit: bool
) -> None:
    _, url, sha = private_repo

    with pytest.raises(CheckoutError) as failure:
        checkout(
            url, tmp_path / "work", **checkout_of(by_commit, sha), auth=GitAuth(https_token="ghp_wrong_token")
        )

    assert "refused the credentials" in str(failure.value)
    assert "ghp_wrong_token" not in str(failure.value)


@BY_BRANCH_OR_COMMIT
def test_private_repository_without_credentials_fails_clearly(
    private_repo: tuple[GitHttpServer, str, str], tmp_path: Path, by_commit: bool
) -> None:
    _, url, sha = private_repo

    with pytest.raises(CheckoutError, match="asks for credentials"):
        checkout(url, tmp_path / "work", **checkout_of(by_commit, sha))


def test_the_executor_lets_its_checkout_thread_take_the_gil_back_within_half_a_millisecond() -> None:
    # pygit2 (cffi) lets go of the GIL around every libgit2 call: at Python's default switch
    # interval (5 ms) each call could wait that long while the event loop ran, and a clone of a
    # small repository took three times as long in an executor as alone (bench/bench_apply.py).
    import sys

    from firstlume.executor.main import GIL_SWITCH_INTERVAL, run_from_env

    default = sys.getswitchinterval()
    try:
        assert run_from_env({}) == 2  # no control plane given: it stops at once
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_INTERVAL)
        assert GIL_SWITCH_INTERVAL <= 0.0005 < default
    finally:
        sys.setswitchinterval(default)
