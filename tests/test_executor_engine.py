"""The engine runner against the real `terraform` binary, with the built-in terraform_data only."""

from __future__ import annotations

from pathlib import Path

from firstlume.executor.engines.base import engine_environment
from firstlume.executor.engines.messages import readable_message


def test_executor_settings_win_over_the_stack_environment(tmp_path: Path) -> None:
    env = engine_environment({}, tmp_path, {"TF_INPUT": "1", "TF_LOG": "debug"})

    assert (env["TF_INPUT"], env["TF_LOG"]) == ("0", "debug")


def test_readable_message_of_a_diagnostic_shows_address_place_and_detail() -> None:
    message = {
        "@message": "Error: local-exec provisioner error",
        "type": "diagnostic",
        "diagnostic": {
            "severity": "error",
            "summary": "local-exec provisioner error",
            "detail": "exit status 1.\nOutput: boom",
            "address": "terraform_data.b",
            "range": {"filename": "main.tf", "start": {"line": 9}},
        },
    }

    assert readable_message(message) == (
        "Error: local-exec provisioner error\n"
        "  with terraform_data.b\n"
        "  on main.tf line 9\n"
        "\n"
        "  exit status 1.\n"
        "  Output: boom\n"
    )
