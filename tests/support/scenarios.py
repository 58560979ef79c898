"""Real Terraform scenarios shared by tests: configurations before and after, and their plans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.terraform import apply, plan_json, terraform_env, write_config

SECRET_OLD = "s3cr3t-old-value"
SECRET_NEW = "s3cr3t-new-value"

SECRET_VAR = """
variable "secret" {
  type      = string
  sensitive = true
}
"""

MAIN_BEFORE = (
    SECRET_VAR
    + """
resource "terraform_data" "gone" { input = "x" }
resource "terraform_data" "repl" {
  input            = "r"
  triggers_replace = ["v1"]
}
resource "terraform_data" "upd1" { input = "a" }
resource "terraform_data" "upd2" { input = { name = "x", secret = var.secret } }
resource "terraform_data" "same" { input = "same" }
"""
)

MAIN_AFTER = (
    SECRET_VAR
    + """
resource "terraform_data" "repl" {
  input            = "r"
  triggers_replace = ["v2"]
}
resource "terraform_data" "upd1" { input = "b" }
resource "terraform_data" "upd2" { input = { name = "y", secret = var.secret } }
resource "terraform_data" "same" { input = "same" }
resource "terraform_data" "new1" { input = var.secret }
resource "terraform_data" "new2" { input = "n" }
"""
)

OTHER_BEFORE = (
    SECRET_VAR
    + """
resource "terraform_data" "cbd" {
  input            = "c"
  triggers_replace = "v1"
  lifecycle { create_before_destroy = true }
}
resource "terraform_data" "asked" { input = "k" }
resource "terraform_data" "kept" { input = "f" }
resource "terraform_data" "rotate" { input = var.secret }
"""
)

OTHER_AFTER = (
    SECRET_VAR
    + """
resource "terraform_data" "cbd" {
  input            = "c"
  triggers_replace = "v2"
  lifecycle { create_before_destroy = true }
}
resource "terraform_data" "asked" { input = "k" }
removed {
  from = terraform_data.kept
  lifecycle { destroy = false }
}
resource "terraform_data" "rotate" { input = var.secret }
resource "terraform_data" "path" { input = "${path.module}/other.tfstate" }
data "terraform_remote_state" "other" {
  backend = "local"
  config  = { path = terraform_data.path.output }
}
"""
)


def two_step_plan(workdir: Path, tmp: Path, before: str, after: str, *plan_args: str) -> dict[str, Any]:
    env = terraform_env(tmp)
    write_config(workdir, before)
    apply(workdir, env, f"-var=secret={SECRET_OLD}")
    write_config(workdir, after)
    return plan_json(workdir, env, f"-var=secret={SECRET_NEW}", *plan_args)
