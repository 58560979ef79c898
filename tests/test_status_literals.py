"""Run statuses, step statuses and resource states are named only in domain/: every other module
uses the domain enums (RunStatus, StepStatus, ResourceState), so a renamed or added status is
found by the type checker, not by grep."""

from __future__ import annotations

import ast
from pathlib import Path

from firstlume.domain.runs import ResourceState, RunStatus, StepStatus

PACKAGE = Path(__file__).resolve().parent.parent / "backend" / "firstlume"
STATUS_VALUES = {member.value for enum in (RunStatus, StepStatus, ResourceState) for member in enum}

# Where such a literal must stay, and why.
ALLOWED_DIRECTORIES = {
    # A migration is frozen SQL and data of its day: it must not change when the enums do.
    PACKAGE / "db" / "migrations",
    # The HCP Terraform API's own vocabulary (its runs', plans' and configuration versions'
    # statuses: "pending", "planning", "applied", ...), which the Terraform CLI reads: words it
    # shares with ours, whose meaning is HCP Terraform's. api/tfe maps our enums onto them.
    PACKAGE / "api" / "tfe",
}
# Single modules that speak another system's vocabulary, which shares words with ours.
ALLOWED_FILES = {
    # Git hosts' commit-status states (GitHub/Gitea "pending", "failure"; GitLab "failed", "canceled").
    PACKAGE / "services" / "git" / "host_clients.py",
    # A configuration version's status as HCP Terraform names it ("pending" until its upload).
    PACKAGE / "db" / "models_cli.py",
    PACKAGE / "services" / "cli" / "configuration_versions.py",
    # A dependency trigger's outcome for a dependent ("skipped": it was deleted meanwhile).
    PACKAGE / "services" / "dependencies" / "triggers.py",
}


def status_literals(path: Path) -> list[str]:
    """Each string constant in the module whose whole value is a status, as "file:line: 'value'"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in STATUS_VALUES:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value!r}")
    return found


def scanned_modules() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if "domain" not in path.relative_to(PACKAGE).parts[:1]
        and not any(path.is_relative_to(allowed) for allowed in ALLOWED_DIRECTORIES)
        and path not in ALLOWED_FILES
    ]


def test_the_scan_sees_the_whole_package_and_finds_a_literal() -> None:
    modules = scanned_modules()
    assert PACKAGE / "services" / "transitions.py" in modules
    assert PACKAGE / "executor" / "phase.py" in modules
    assert not any("domain" in p.relative_to(PACKAGE).parts for p in modules)
    probe = PACKAGE.parent / "probe_status_literal.py"
    probe.write_text('STATE = {"state": "not_applied"}\nTEXT = "the run failed"\n')
    try:
        assert status_literals(probe) == ["probe_status_literal.py:1: 'not_applied'"]
    finally:
        probe.unlink()


def test_no_module_outside_the_domain_spells_a_status() -> None:
    found = [literal for path in scanned_modules() for literal in status_literals(path)]
    assert found == [], "use the domain enums instead:\n" + "\n".join(found)
