"""The documentation's curl commands, verbatim, against `make run` served by uvicorn."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC_COMMANDS = {
    "start": """curl -s -H "$H" $O/stacks/$ST/runs -d '{"type": "plan"}'""",
    "changes": """curl -s -H "$H" $O/runs/$RUN/changes | jq .""",
    "approve": """curl -s -X POST -H "$H" $O/runs/$RUN/approve -d '{"acknowledged": []}'""",
    "discard": """curl -s -X POST -H "$H" $O/runs/$RUN/discard""",
}


def test_doc_commands_are_quoted_from_the_documentation() -> None:
    spec = Path(__file__).resolve().parents[2] / "shared" / "spec" / "runs-and-approval.txt"
    if not spec.exists():  # a clone outside the workspace: the commands above are the reference
        spec = ROOT / "docs" / "runs-and-approval.txt"
    text = spec.read_text()
    for command in DOC_COMMANDS.values():
        assert command in text, command
