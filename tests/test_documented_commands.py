"""The documentation's curl commands, verbatim, against `make run` served by uvicorn."""

from __future__ import annotations

import re
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


# The README's command blocks (each after a `<!-- name: … -->` marker) ---------------------------

README = ROOT / "README.md"


def readme_block(name: str) -> list[str]:
    """The command lines of the ```sh block after the README's `<!-- name: …` marker, without
    their `# …` remarks."""
    after = README.read_text().split(f"<!-- {name}:", 1)
    assert len(after) == 2, f"the README has no `<!-- {name}: … -->` marker"
    block = re.search(r"```sh\n(.*?)```", after[1], re.S)
    assert block, f"no ```sh block after the README's {name} marker"
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.group(1).splitlines() if line.strip()]


def sh_lines(text: str) -> list[str]:
    return [line for block in re.findall(r"```sh\n(.*?)```", text, re.S) for line in block.splitlines()]


def test_the_readme_state_example_declares_the_backend_and_keeps_the_token_out_of_files() -> None:
    lines = readme_block("managed state")
    script = "\n".join(lines)
    # Terraform's http backend is used only by code that declares it.
    assert 'backend "http" {}' in script.replace("\\n", "\n")
    # The token travels in the environment: -backend-config values are written into .terraform/.
    assert "TF_HTTP_PASSWORD=$FIRSTLUME_TOKEN" in script
    assert "-backend-config" not in script and "password=" not in script.replace("TF_HTTP_PASSWORD=", "")


def test_the_readme_runs_firstlume_from_where_make_run_installed_it() -> None:
    """`firstlume …` in a shell block is "command not found" after `make run` (it lives in
    .venv/bin/); the blocks say `.venv/bin/firstlume`."""
    bare = [line for line in sh_lines(README.read_text()) if re.match(r"\s*firstlume\s", line)]
    assert not bare, f"these README lines run `firstlume` as if it were on PATH: {bare}"
    assert any(line.startswith(".venv/bin/firstlume ") for line in readme_block("bootstrap"))
