"""The engine runs the real terraform: plans, applies, destroys, outputs, cancelling, its environment."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from firstlume.executor.engines import EngineError, make_engine
from firstlume.executor.engines.base import engine_environment, write_var_file
from firstlume.executor.engines.messages import readable_message
from firstlume.protocol.executor import StateBackend
from support.answering import answering

VARIABLE_TF = """
variable "region" {}
resource "terraform_data" "site" {
  input = var.region
}
"""


ENV_TF = """
resource "terraform_data" "env" {
  input = "x"
  provisioner "local-exec" {
    command = "echo my_env=$MY_ENV token=$${FIRSTLUME_EXECUTOR_TOKEN:-absent}"
  }
}
"""


FAILING_TF = """
resource "terraform_data" "ok" {
  input = "fine"
}
resource "terraform_data" "broken" {
  input = "x"
  provisioner "local-exec" {
    command = "exit 1"
  }
}
"""


SLOW_TF = """
resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "echo started; sleep 60"
  }
}
"""


class Stack:
    """A code dir and a work dir side by side, with an engine whose log is kept in memory."""

    def __init__(
        self, tmp_path: Path, files: dict[str, str], extra_env: dict[str, str] | None = None
    ) -> None:
        self.code_dir = tmp_path / "checkout" / "infra"
        self.work_dir = tmp_path / "work"
        self.code_dir.mkdir(parents=True)
        self.work_dir.mkdir()
        for name, text in files.items():
            (self.code_dir / name).write_text(text, encoding="utf-8")
        base = dict(os.environ)
        base["FIRSTLUME_EXECUTOR_TOKEN"] = "phase-token-secret"
        base["TF_CLI_CONFIG_FILE"] = str(tmp_path / "missing.tfrc")
        self.env = engine_environment(base, self.work_dir, extra_env or {})
        self.lines: list[str] = []
        self.logged = asyncio.Event()
        self.engine = make_engine(
            "terraform", code_dir=self.code_dir, work_dir=self.work_dir, env=self.env, log=self.write
        )
        self.plan_file = self.work_dir / "plan.tfplan"

    def write(self, text: str) -> None:
        self.lines.append(text)
        self.logged.set()

    async def wait_for_log(self, text: str) -> None:
        async with asyncio.timeout(30):
            while text not in self.log:
                await self.logged.wait()
                self.logged.clear()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    async def plan(self, variables: dict[str, Any] | None = None, destroy: bool = False) -> bool:
        var_file = write_var_file(self.work_dir, variables or {})
        return await self.engine.plan(self.plan_file, var_file=var_file, destroy=destroy)

    async def apply(self) -> tuple[int, list[dict[str, Any]]]:
        messages: list[dict[str, Any]] = []

        def on_message(message: dict[str, Any]) -> None:
            messages.append(message)
            self.write(readable_message(message))

        code = await self.engine.apply(self.plan_file, on_message)
        return code, messages


async def test_plan_takes_variables_from_a_var_file_outside_the_checkout(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"main.tf": VARIABLE_TF})
    await stack.engine.init()

    has_changes = await stack.plan({"region": "eu-west-1", "undeclared": "ignored"})
    plan = await stack.engine.show_json(stack.plan_file)

    assert has_changes is True
    [change] = plan["resource_changes"]
    assert (change["address"], change["change"]["actions"]) == ("terraform_data.site", ["create"])
    assert change["change"]["after"]["input"] == "eu-west-1"
    assert not list(stack.code_dir.parent.rglob("*.tfvars.json"))
    assert "Plan: 1 to add" in stack.log


async def test_plan_without_changes_says_so(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"main.tf": 'variable "unused" {\n  default = 1\n}\n'})
    await stack.engine.init()

    assert await stack.plan() is False


async def test_destroy_plan_deletes_what_was_applied(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"main.tf": VARIABLE_TF})
    await stack.engine.init()
    await stack.plan({"region": "eu"})
    code, _ = await stack.apply()
    assert code == 0

    assert await stack.plan({"region": "eu"}, destroy=True) is True
    plan = await stack.engine.show_json(stack.plan_file)

    assert [c["change"]["actions"] for c in plan["resource_changes"]] == [["delete"]]


async def test_apply_streams_json_messages_and_keeps_the_log_readable(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"main.tf": ENV_TF}, extra_env={"MY_ENV": "from-config"})
    await stack.engine.init()
    await stack.plan()

    code, messages = await stack.apply()

    assert code == 0
    types = [m["type"] for m in messages]
    assert types.index("apply_start") < types.index("apply_complete")
    assert "terraform_data.env: Creation complete" in stack.log
    assert "my_env=from-config token=absent" in stack.log  # the phase token never reaches the engine
    assert '{"@level"' not in stack.log


async def test_apply_of_a_failing_resource_exits_non_zero_with_its_diagnostic(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"main.tf": FAILING_TF})
    await stack.engine.init()
    await stack.plan()

    code, messages = await stack.apply()

    assert code != 0
    errored = [m["hook"]["resource"]["addr"] for m in messages if m["type"] == "apply_errored"]
    assert errored == ["terraform_data.broken"]
    [diagnostic] = [m["diagnostic"] for m in messages if m["type"] == "diagnostic"]
    assert diagnostic["address"] == "terraform_data.broken"
    assert "Error: local-exec provisioner error\n  with terraform_data.broken\n" in stack.log


async def test_engine_gets_its_own_cli_config_and_no_firstlume_variables(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"main.tf": VARIABLE_TF})

    await stack.engine.init()

    assert not any(name.startswith("FIRSTLUME_") for name in stack.env)
    assert stack.env["TF_CLI_CONFIG_FILE"] == str(stack.work_dir / "firstlume.tfrc")
    assert "Firstlume" in Path(stack.env["TF_CLI_CONFIG_FILE"]).read_text()  # noqa: ASYNC240
    assert (stack.env["TF_IN_AUTOMATION"], stack.env["TF_INPUT"]) == ("1", "0")
    assert "Unable to open CLI configuration file" not in stack.log
    assert "Terraform has been successfully initialized!" in stack.log


async def test_failed_plan_raises_with_the_engine_error_summary(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"main.tf": VARIABLE_TF})
    await stack.engine.init()

    with pytest.raises(
        EngineError, match=r"terraform plan failed \(exit code 1\): Error: No value for required variable"
    ):
        await stack.plan({})


async def test_missing_engine_binary_is_a_clear_error(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"main.tf": VARIABLE_TF})
    engine = make_engine(
        "tofu",
        code_dir=stack.code_dir,
        work_dir=stack.work_dir,
        env=stack.env,
        log=print,
        binary="no-such-tofu",
    )

    with pytest.raises(EngineError, match="no-such-tofu is not installed"):
        await engine.init()


async def test_state_backend_is_local_without_a_backend_block(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"main.tf": VARIABLE_TF})
    await stack.engine.init()

    assert stack.engine.state_backends() == [StateBackend(unit=".", backend="local")]


@pytest.fixture
def http_state_server() -> Iterator[str]:
    with answering(404) as url:  # the http backend's "no state yet"
        yield f"{url}/state"


async def test_state_backend_is_the_one_init_configured(tmp_path: Path, http_state_server: str) -> None:
    backend = f'terraform {{\n  backend "http" {{\n    address = "{http_state_server}"\n  }}\n}}\n'
    stack = Stack(tmp_path, {"main.tf": VARIABLE_TF, "backend.tf": backend})

    await stack.engine.init()

    assert stack.engine.state_backends() == [StateBackend(unit=".", backend="http")]


async def test_lock_file_is_absent_without_providers_and_restored_for_apply(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"main.tf": VARIABLE_TF})
    await stack.engine.init()
    assert stack.engine.lock_file() is None

    stack.engine.restore_lock_file("# lock\n")

    assert stack.engine.lock_file() == "# lock\n"


async def test_cancelling_an_apply_interrupts_the_engine(tmp_path: Path) -> None:
    stack = Stack(tmp_path, {"main.tf": SLOW_TF})
    await stack.engine.init()
    await stack.plan()
    task = asyncio.create_task(stack.apply())
    await stack.wait_for_log("(local-exec): started")

    task.cancel()
    async with asyncio.timeout(30):  # far less than the provisioner's 60 s sleep
        with pytest.raises(asyncio.CancelledError):
            await task


OUTPUTS_TF = """
variable "pw" {
  type      = string
  default   = "s3cret-output-value"
  sensitive = true
}
resource "terraform_data" "a" { input = "x" }
output "str" { value = "hello \\"q\\" ${terraform_data.a.input}" }
output "num" { value = 42.5 }
output "int" { value = 3 }
output "bool" { value = true }
output "tuple" { value = ["a", 1] }
output "empty" { value = [] }
output "obj" { value = { name = "n", nested = { x = [1, 2] } } }
output "secret" {
  value     = var.pw
  sensitive = true
}
output "nothing" { value = null }
output "multi" { value = "line1\\nline2\\n" }
output "set" { value = toset(["b", "a"]) }
output "list" { value = tolist(["b", "a"]) }
output "map" { value = tomap({ a = 1 }) }
"""


async def test_outputs_read_as_terraform_prints_them_with_sensitive_ones_hidden(tmp_path: Path) -> None:
    # The same configuration applied twice: once as a person sees it, once through -json.
    person = Stack(tmp_path / "person", {"main.tf": OUTPUTS_TF})
    await person.engine.init()
    await person.plan()
    printed = await asyncio.create_subprocess_exec(
        "terraform", "apply", "-no-color", "-input=false", str(person.plan_file),
        cwd=person.code_dir, env=person.env, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    human, _ = await printed.communicate()
    stack = Stack(tmp_path / "json", {"main.tf": OUTPUTS_TF})
    await stack.engine.init()
    await stack.plan()

    code, messages = await stack.apply()

    assert code == 0
    [outputs] = [m for m in messages if m["type"] == "outputs"]
    expected = human.decode().split("Apply complete!", 1)[1].split("\n", 1)[1]
    assert readable_message(outputs) == expected.replace("<sensitive>", "(sensitive)")
    assert "secret = (sensitive)" in stack.log and "s3cret-output-value" not in stack.log
    assert stack.log.endswith(expected.replace("<sensitive>", "(sensitive)"))
