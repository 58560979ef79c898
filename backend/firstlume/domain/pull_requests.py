"""What Firstlume tells a Git host about a pull request: a commit status per stack and one
comment per pull request, as pure functions of the runs (no values, never the log)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from firstlume.domain.runs import RunStatus


class HostKind(StrEnum):
    GITHUB = "github"
    GITLAB = "gitlab"
    GITEA = "gitea"


class CommitState(StrEnum):
    """GitHub's and Gitea's commit status states (GitLab's are mapped by its client)."""

    PENDING = "pending"
    SUCCESS = "success"
    FAILURE = "failure"
    ERROR = "error"


# What the comment holds at most: the hosts' limit is 65,536 characters (GitHub).
MAX_COMMENT = 60_000
MAX_DELETIONS = 50
MAX_DESCRIPTION = 140  # GitHub cuts status descriptions at 140 characters


def status_context(stack_slug: str) -> str:
    return f"firstlume/{stack_slug}"


def summary_line(create: int, update: int, delete: int, replace: int) -> str:
    """Terraform's own counting: a replacement is one to add and one to destroy."""
    return f"{create + replace} to add, {update} to change, {delete + replace} to destroy"


def commit_state(status: RunStatus) -> CommitState:
    if status in (RunStatus.PLANNED, RunStatus.NO_CHANGES):
        return CommitState.SUCCESS
    if status == RunStatus.FAILED:
        return CommitState.FAILURE
    if status == RunStatus.CANCELED:
        return CommitState.ERROR
    return CommitState.PENDING


def status_description(status: RunStatus, summary: str, error: str | None) -> str:
    if status == RunStatus.PLANNED:
        text = summary
    elif status == RunStatus.NO_CHANGES:
        text = "No changes"
    elif status in (RunStatus.FAILED, RunStatus.CANCELED):
        text = error or str(status)
    elif status == RunStatus.PLANNING:
        text = "Planning"
    else:
        text = "Queued"
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


@dataclass(frozen=True)
class StackRow:
    """One stack's latest proposed run of the pull request, as the comment shows it."""

    stack: str
    run_number: int
    status: RunStatus
    summary: str
    url: str
    head_sha: str
    # Deleted or replaced addresses in plan order (all of them; the comment shortens).
    deletions: Sequence[tuple[str, str]]  # (action, address)
    deletion_count: int


_ICONS = {
    CommitState.SUCCESS: "✅",
    CommitState.FAILURE: "❌",
    CommitState.ERROR: "⚪",
    CommitState.PENDING: "⏳",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_comment(rows: Sequence[StackRow]) -> str:
    """The pull request's comment: one row per stack, then each stack's deletions and
    replacements by address (at most MAX_DELETIONS, then "and N more"); at most MAX_COMMENT
    characters whatever the plan."""
    lines = [
        "### Firstlume plans",
        "",
        "| Stack | Status | Plan | Run |",
        "| --- | --- | --- | --- |",
    ]
    for row in rows:
        icon = _ICONS[commit_state(row.status)]
        plan = row.summary if row.status == RunStatus.PLANNED else ""
        lines.append(
            f"| `{_cell(row.stack)}` | {icon} {row.status.value} | {plan} | [#{row.run_number}]({row.url}) |"
        )
    head = rows[0].head_sha[:7] if rows else ""
    footer = [
        "",
        f"<sub>Planned at {head} by Firstlume: proposed runs never apply. Edited in place at every new head.</sub>",
    ]
    body = "\n".join(lines)
    budget = MAX_COMMENT - len(body) - len("\n".join(footer)) - 200
    sections: list[str] = []
    for row in rows:
        if not row.deletions:
            continue
        shown = list(row.deletions[:MAX_DELETIONS])
        part = [
            "",
            f"**`{_cell(row.stack)}`: {row.deletion_count} to delete or replace**",
            "",
            *(f"- {action} `{_cell(address)}`" for action, address in shown),
        ]
        more = row.deletion_count - len(shown)
        if more > 0:
            part.append(f"- and {more} more")
        text = "\n".join(part)
        if len(text) > budget:
            sections.append(
                f"\n**`{_cell(row.stack)}`**: {row.deletion_count} to delete or replace (see the run)"
            )
            budget -= len(sections[-1])
            continue
        sections.append(text)
        budget -= len(text)
    comment = body + "".join(sections) + "\n".join(footer)
    return comment[:MAX_COMMENT]
