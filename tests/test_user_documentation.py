"""docs/runs-and-approval.txt says what the code does: the sections it refers to exist, who may
approve is the approver check's rules, a stale plan is refused with the error the code gives,
and its commands work as written."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from conftest import Tenant, make_stack
from firstlume.domain.inheritance import SETTING_DEFAULTS, Resolved
from firstlume.domain.state import moved_units, state_moved_message
from firstlume.services.access.approvers import recorded_rules
from firstlume.services.context import Context

DOC = Path(__file__).resolve().parent.parent / "docs" / "runs-and-approval.txt"


def text() -> str:
    return DOC.read_text()


def section(title: str) -> str:
    """The text under a heading (a line of its own) up to the next heading the doc has."""
    lines = text().splitlines()
    start = lines.index(title) + 1
    headings = {"Review the changes", "Confirm each deletion or replacement", "Follow the apply"}
    end = next((i for i in range(start, len(lines)) if lines[i] in headings), len(lines))
    return "\n".join(lines[start:end])


def test_every_section_the_documentation_refers_to_exists() -> None:
    lines = set(text().splitlines())
    references = re.findall(r"\bSee ([A-Z][\w ]+?) for\b", text())
    assert references, "the documentation refers to no section"
    for title in references:
        assert title in lines, f"'See {title}' refers to no section of {DOC.name}"


def test_the_approval_section_names_every_rule_the_approver_check_reads() -> None:
    approval = section("Approval")
    rules = recorded_rules({name: Resolved(SETTING_DEFAULTS[name], "default") for name in SETTING_DEFAULTS})
    for name in (key for key in rules if not key.endswith("_origin")):
        assert name in approval, f"the Approval section does not say what '{name}' does"
    assert "operator" in approval and "admin" in approval and "reader" in approval
    assert "planned" not in approval and "any member of the organization can approve" not in approval


def test_the_stale_plan_error_is_quoted_as_the_code_words_it() -> None:
    error = state_moved_message(moved_units({".": 3}, {".": 5}))
    apply_section = section("Apply runs what was planned")
    assert f'"{error}"' in apply_section
    assert "Terraform itself refuses" not in apply_section
    assert "apply step shows as failed" in apply_section


async def test_the_approvers_command_works_as_written(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///repo", "folder": "prod"})
    [command] = [line for line in text().splitlines() if "approvers" in line and line.startswith("curl")]
    path, body = re.fullmatch(r"""curl -s -X PATCH -H "\$H" \$O(\S+) -d '(.*)'""", command).groups()  # type: ignore[union-attr]
    o = f"/api/v1/orgs/{tenant.org}"
    # What curl -d sends: the body with a form Content-Type.
    headers = {**tenant.headers, "Content-Type": "application/x-www-form-urlencoded"}
    response = await client.patch(o + path, content=body, headers=headers)
    assert response.status_code == 200, response.text
    effective = (await client.get(f"{o}/stacks/web/settings", headers=tenant.headers)).json()["effective"]
    assert effective["approvers"] == {"value": ["group:sre"], "origin": "folder:prod"}
    assert effective["forbid_self_approval"] == {"value": True, "origin": "folder:prod"}
