"""Pure rules of Git-driven runs: repository URLs normalised for matching, which changed paths
touch a stack (its path, `watch:` globs), and which host a webhook's headers name."""

from __future__ import annotations

import pytest

from firstlume.domain.errors import InvalidSignature, UnsupportedWebhook
from firstlume.domain.git import Dialect, normalize_repository, touches_stack
from firstlume.services.git.webhooks import identify, verify


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/infra",
        "https://GitHub.com/acme/infra.git",
        "https://github.com/acme/infra/",
        "http://github.com/acme/infra.git/",
        "git@github.com:acme/infra.git",
        "ssh://git@github.com/acme/infra",
        "ssh://git@github.com:22/acme/infra.git",
        "git://github.com/acme/infra.git",
        "https://user:token@github.com/acme/infra.git",
    ],
)
def test_urls_of_one_repository_normalise_alike(url: str) -> None:
    assert normalize_repository(url) == "github.com/acme/infra"


def test_other_repositories_and_paths_keep_their_differences() -> None:
    assert normalize_repository("https://github.com/acme/Infra") != normalize_repository(
        "https://github.com/acme/infra"
    )
    assert normalize_repository("https://github.com/acme/infra-2") != normalize_repository(
        "https://github.com/acme/infra"
    )
    assert normalize_repository("http://127.0.0.1:8080/infra") == "127.0.0.1:8080/infra"
    assert normalize_repository("file:///srv/git/infra.git/") == "/srv/git/infra"


@pytest.mark.parametrize(
    ("paths", "stack_path", "watch", "touched"),
    [
        (["infra/main.tf"], "infra", [], True),
        (["infra"], "infra", [], True),
        (["infra-old/main.tf"], "infra", [], False),  # a sibling with a common prefix
        (["docs/README.md"], "infra", [], False),
        (["docs/README.md"], ".", [], True),  # the repository's root: every change
        (["modules/net/main.tf"], "infra", ["modules/**"], True),
        (["modules/main.tf"], "infra", ["modules/*.tf"], True),
        (["modules/net/main.tf"], "infra", ["modules/*.tf"], False),  # * stays in one segment
        (["a/b/c/versions.tf"], "infra", ["**/versions.tf"], True),
        (["versions.tf"], "infra", ["**/versions.tf"], True),  # **/ matches no directory too
        (["shared/x/y.tf"], "infra", ["shared"], True),  # a directory named plainly
        (["shared.tf"], "infra", ["shared"], False),
        (["/lib/a.tf"[1:]], "infra", ["/lib/**"], True),  # a leading slash means the root
        (None, "infra", [], True),  # unknown changes count
        ([], "infra", ["**"], False),
    ],
)
def test_which_changes_touch_a_stack(
    paths: list[str] | None, stack_path: str, watch: list[str], touched: bool
) -> None:
    assert touches_stack(paths, stack_path, watch) is touched


def test_the_headers_name_the_host_and_gitea_wins_over_its_github_copies() -> None:
    gitea = identify(
        {"X-Gitea-Event": "push", "X-GitHub-Event": "push", "X-Gitea-Delivery": "d", "X-Gitea-Signature": "s"}
    )
    assert (gitea.dialect, gitea.delivery, gitea.signature) == (Dialect.GITEA, "d", "s")
    forgejo = identify({"X-Forgejo-Event": "push", "X-Forgejo-Delivery": "f", "X-Forgejo-Signature": "t"})
    assert (forgejo.dialect, forgejo.delivery, forgejo.signature) == (Dialect.GITEA, "f", "t")
    gitlab = identify({"X-Gitlab-Event": "Push Hook", "X-Gitlab-Event-UUID": "u", "X-Gitlab-Token": "k"})
    assert (gitlab.dialect, gitlab.is_push, gitlab.delivery) == (Dialect.GITLAB, True, "u")
    assert identify({"X-GitHub-Event": "ping"}).is_push is False
    with pytest.raises(UnsupportedWebhook):
        identify({"Content-Type": "application/json"})


def test_a_signature_with_non_ascii_text_is_refused_not_a_crash() -> None:
    hook = identify({"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=é"})
    with pytest.raises(InvalidSignature):
        verify(hook, b"{}", "secret")
