"""Stack dependencies with real Terraform and managed state (adoption-api.md, section 9):
network → cluster → app. An apply of network that changes `vpc_id` starts exactly one run of
cluster, whose apply changing `cluster_id` starts exactly one run of app; each run's
configuration names the output, stack and serial it read; a sensitive output stays sensitive;
an apply that changes no read output, and a failed one, start nothing; a missing output fails
the dependent's plan with that reason. Served control plane, SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import LiveServer
from support.e2e import Api, StackRepo
from support.git_repos import make_repo
from support.terraform import requires_terraform
from support.waiting import wait_until

pytestmark = requires_terraform

PASSWORD = "db-pass-7f3e1c9a-never-shown"

NETWORK = """
variable "cidr" {
  type    = string
  default = "10.0.0.0/16"
}
resource "terraform_data" "vpc" { input = var.cidr }
output "vpc_id" { value = "vpc-${terraform_data.vpc.output}" }
output "note" { value = "NOTE" }
output "db_password" {
  value     = "PASSWORD"
  sensitive = true
}
""".replace("PASSWORD", PASSWORD)

CLUSTER = """
variable "vpc_id" { type = string }
variable "db_password" {
  type      = string
  sensitive = true
}
resource "terraform_data" "cluster" { input = "cluster-in-${var.vpc_id}" }
resource "terraform_data" "db" { input = sha256(var.db_password) }
output "cluster_id" { value = terraform_data.cluster.output }
"""

APP = """
variable "cluster" { type = string }
resource "terraform_data" "app" { input = var.cluster }
"""

FAILING = (
    NETWORK
    + """
resource "terraform_data" "broken" {
  provisioner "local-exec" { command = "exit 3" }
}
"""
)


def repo(tmp_path: Path, name: str, code: str) -> StackRepo:
    url, _ = make_repo(tmp_path / name, {"infra/main.tf": code})
    return StackRepo(path=tmp_path / name, url=url, state_path=tmp_path / f"{name}-no-state")


def runs_of(api: Api, stack: str) -> list[dict[str, Any]]:
    response = api.http.get(f"{api.o}/stacks/{stack}/runs")
    assert response.status_code == 200, response.text
    return sorted(response.json()["runs"], key=lambda r: r["number"])  # type: ignore[no-any-return]


def triggered_by(api: Api, stack: str, upstream_run: str) -> dict[str, Any]:
    """The one run of `stack` that `upstream_run` started, once it exists."""

    def found() -> dict[str, Any] | None:
        matching = [r for r in runs_of(api, stack) if r["trigger"].get("upstream_run") == upstream_run]
        assert len(matching) <= 1, matching
        return matching[0] if matching else None

    return wait_until(found, 60, f"a run of {stack} started by {upstream_run}", interval=0.2)


def serial(api: Api, stack: str) -> int:
    return int(api.http.get(f"{api.o}/stacks/{stack}/state/versions").json()["versions"][0]["serial"])


def variables(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in run["configuration"]["variables"]}


def set_dependencies(api: Api, stack: str, body: dict[str, Any]) -> None:
    response = api.http.put(f"{api.o}/stacks/{stack}/dependencies", content=json.dumps(body))
    assert response.status_code == 200, response.text


def test_a_changed_output_flows_down_the_chain_once_per_run(
    api: Api, server: LiveServer, tmp_path: Path
) -> None:
    api.settings("", {"require_approval": False})
    network = repo(tmp_path, "network", NETWORK)
    api.create_stack("network", network)
    api.create_stack("cluster", repo(tmp_path, "cluster", CLUSTER), trigger="apply")
    api.create_stack("app", repo(tmp_path, "app", APP))  # manual: a dependency starts a plan
    set_dependencies(
        api,
        "cluster",
        {"depends_on": [{"stack": "network", "outputs": {"vpc_id": "vpc_id", "db_password": "db_password"}}]},
    )
    set_dependencies(api, "app", {"depends_on": [{"stack": "cluster", "outputs": {"cluster_id": "cluster"}}]})

    # A plan of app before cluster has any state fails, naming the missing output.
    early = api.start("app", "plan")
    failed = api.wait(early, "failed")
    assert "reads output 'cluster_id' of stack 'cluster'" in failed["error"]
    assert "no state yet" in failed["error"]

    first = api.start("network", "apply")
    api.wait(first, "applied")
    network_serial = serial(api, "network")
    cluster_run = triggered_by(api, "cluster", first)
    assert cluster_run["type"] == "apply"
    assert cluster_run["trigger"]["kind"] == "dependency"
    cluster_run = api.wait(cluster_run["id"], "applied")
    used = variables(cluster_run)
    assert used["vpc_id"]["origin"] == f"output vpc_id of stack network, state serial {network_serial}"
    assert used["vpc_id"]["sensitive"] is False
    assert used["db_password"] == {
        "name": "db_password",
        "origin": f"output db_password of stack network, state serial {network_serial}",
        "sensitive": True,
        "kind": "terraform",
    }
    cluster_state = json.loads(api.http.get(f"{api.o}/stacks/cluster/state").content)
    assert cluster_state["outputs"]["cluster_id"]["value"] == "cluster-in-vpc-10.0.0.0/16"

    app_run = triggered_by(api, "app", cluster_run["id"])
    assert app_run["type"] == "plan" and app_run["trigger"]["kind"] == "dependency"
    app_run = api.wait(app_run["id"], "planned")
    assert variables(app_run)["cluster"]["origin"] == (
        f"output cluster_id of stack cluster, state serial {serial(api, 'cluster')}"
    )

    # The sensitive output appears in no response, log or change of the dependent.
    for run_id in (cluster_run["id"],):
        assert PASSWORD not in json.dumps(api.run(run_id))
        assert PASSWORD not in api.log(run_id)
        assert PASSWORD not in json.dumps(api.changes(run_id))
    query = (
        'query($org: String!) { organization(slug: $org) { stack(slug: "cluster") { runs(first: 5) { nodes {'
        " trigger { kind upstreamRun } configuration { variables { name origin sensitive } } } } } } }"
    )
    graphql = api.http.post(
        api.o.split("/api/")[0] + "/graphql",
        json={"query": query, "variables": {"org": api.o.rsplit("/", 1)[1]}},
    )
    assert graphql.status_code == 200 and "errors" not in graphql.json(), graphql.text
    assert first in graphql.text and "db_password" in graphql.text and PASSWORD not in graphql.text
    assert PASSWORD not in server.log()

    # An apply that changes only an output nobody reads starts nothing; nor does a failed apply.
    network.commit({"main.tf": NETWORK.replace('"NOTE"', '"OTHER NOTE"')}, "Another note")
    quiet = api.start("network", "apply")
    api.wait(quiet, "applied")
    network.commit({"main.tf": FAILING.replace("10.0.0.0/16", "10.9.0.0/16")}, "Broken")
    broken = api.start("network", "apply")
    assert api.wait(broken, "failed")["status"] == "failed"

    # A change of vpc_id starts cluster once more; dependency triggers are carried out oldest
    # first, so by then the two applies above were handled, and they started nothing.
    network.commit({"main.tf": NETWORK.replace("10.0.0.0/16", "10.1.0.0/16")}, "New range")
    moved = api.start("network", "apply")
    api.wait(moved, "applied")
    second = api.wait(triggered_by(api, "cluster", moved)["id"], "applied")
    assert variables(second)["vpc_id"]["origin"] == (
        f"output vpc_id of stack network, state serial {serial(api, 'network')}"
    )
    api.wait(triggered_by(api, "app", second["id"])["id"], "planned")
    assert [r["trigger"].get("upstream_run") for r in runs_of(api, "cluster")] == [first, moved]
    app_runs = runs_of(api, "app")
    assert [r["trigger"].get("upstream_run") for r in app_runs] == [None, cluster_run["id"], second["id"]]
