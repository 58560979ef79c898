"""Browser: a stack's State tab: versions (serial, time, who or which run, resources) with their
download, outputs with sensitive values hidden, and the lock's holder with force-unlock; at a
laptop's size and a phone's. Pinned to SQLite, as the other browser tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from conftest import LiveServer, Tenant
from support.e2e import Api, StackRepo
from support.git_repos import make_repo
from support.terraform import requires_terraform

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = [requires_terraform, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

SECRET = "browser-secret-41c9"
CODE = """
resource "terraform_data" "app" { input = "web" }
resource "terraform_data" "db" { input = "db" }
output "url" { value = "https://${terraform_data.app.output}.example.com" }
output "password" {
  value     = "SECRET"
  sensitive = true
}
""".replace("SECRET", SECRET)


@pytest.fixture
def applied(api: Api, tmp_path: Path) -> str:
    url, _ = make_repo(tmp_path / "repo", {"infra/main.tf": CODE})
    api.create_stack("app", StackRepo(path=tmp_path / "repo", url=url, state_path=tmp_path / "none"))
    return api.apply_approved("app")


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_state_tab_shows_versions_outputs_and_the_lock(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, applied: str, size: str
) -> None:
    base = f"{api.o}/stacks/app/state"
    info = {"ID": "maintenance-1", "Operation": "OperationTypeApply", "Who": "ada@laptop"}
    assert api.http.request("LOCK", f"{base}/lock", content=json.dumps(info)).status_code == 200
    page = ui.open(ui.sizes[size])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/stacks/app/state")
    expect(page).to_have_title("State · app · Stacks · Firstlume")

    row = page.locator("tr[data-serial]").first
    expect(row).to_contain_text("run #1 (apply phase)")
    expect(row.get_by_role("link", name="run #1 (apply phase)")).to_have_attribute(
        "href", f"/orgs/{tenant.org}/runs/{applied}"
    )
    expect(row).to_contain_text("2")
    expect(page.locator(".outputs-table")).to_contain_text("https://web.example.com")
    expect(page.locator(".outputs-table")).to_contain_text("(sensitive)")
    assert SECRET not in page.content()
    expect(page.get_by_test_id("lock-state")).to_contain_text(f"Locked by {tenant.email}")
    expect(page.get_by_test_id("lock-state")).to_contain_text("maintenance-1")
    ui.check_screen(page, f"{size}-stack-state")

    if size == "desktop":
        serial = api.http.get(f"{base}/versions").json()["versions"][0]["serial"]
        with page.expect_download() as download:
            row.get_by_role("button", name=f"Download version {serial}").click()
        saved = Path(download.value.path())
        assert download.value.suggested_filename == f"app-{serial}.tfstate"
        assert json.loads(saved.read_text())["serial"] == serial

    page.get_by_role("button", name="Force-unlock…").click()
    page.get_by_role("button", name="Force-unlock", exact=True).click()
    expect(page.get_by_test_id("lock-state")).to_have_text("Not locked.")
    assert api.http.get(f"{base}/lock").json() == {"lock": None}
    assert ui.close() == []


SECOND = (
    CODE.replace('input = "web"', 'input = "web2"')
    + """
resource "terraform_data" "cache" { input = "cache" }
output "zones" { value = tolist(["a", "b"]) }
output "sizes" { value = tomap({ small = 1 }) }
"""
)


@pytest.fixture
def applied_twice(api: Api, applied: str, tmp_path: Path) -> str:
    repo = StackRepo(path=tmp_path / "repo", url="", state_path=tmp_path / "none")
    repo.commit({"main.tf": SECOND}, "Add a cache")
    return api.apply_approved("app")


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_state_tab_lists_resources_diffs_two_versions_and_writes_output_types(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, applied_twice: str, size: str
) -> None:
    versions = api.http.get(f"{api.o}/stacks/app/state/versions").json()["versions"]
    newest, oldest = versions[0]["serial"], versions[-1]["serial"]
    page = ui.open(ui.sizes[size])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/stacks/app/state")

    table = page.locator(".resources-table")
    expect(table.locator("tr[data-address]")).to_have_count(3)
    expect(table.locator('tr[data-address="terraform_data.cache"]')).to_contain_text(
        "terraform.io/builtin/terraform"
    )
    page.get_by_label("Find resources by address, type or provider").fill("cach")
    expect(table.locator("tr[data-address]")).to_have_count(1)
    expect(page.get_by_test_id("resources-range")).to_have_text("1–1 of 1 matching")

    outputs = page.locator(".outputs-table")
    expect(outputs.locator("tr", has_text="zones")).to_contain_text("list(string)")
    expect(outputs.locator("tr", has_text="sizes")).to_contain_text("map(number)")
    expect(outputs.locator("td[data-label='Type']", has_text="[")).to_have_count(0)  # no raw JSON

    form = page.get_by_role("form", name="Compare two state versions")
    form.get_by_label("From").select_option(str(oldest))
    form.get_by_label("To").select_option(str(newest))
    form.get_by_role("button", name="Compare").click()
    diff = page.get_by_test_id("state-diff")
    expect(diff.locator("[data-diff='added']")).to_contain_text("terraform_data.cache")
    expect(diff.locator("[data-diff='changed']")).to_contain_text("terraform_data.app")
    expect(diff.locator("[data-diff='removed']")).to_have_count(0)
    expect(page.get_by_test_id("diff-summary")).to_have_text(
        f"Serial {oldest} → {newest}: 1 added, 0 removed, 1 changed."
    )
    assert SECRET not in page.content()
    ui.check_screen(page, f"{size}-stack-state-resources")
    assert ui.close() == []


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_a_state_of_10000_resources_is_listed_a_page_at_a_time(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, tmp_path: Path, size: str
) -> None:
    api.create_stack("big", StackRepo(path=tmp_path, url="file:///nowhere", state_path=tmp_path / "none"))
    resources = [
        {
            "mode": "managed",
            "type": "terraform_data",
            "name": f"r{n:05}",
            "provider": 'provider["terraform.io/builtin/terraform"]',
            "instances": [{"attributes": {"input": SECRET}}],
        }
        for n in range(10_000)
    ]
    state = {"version": 4, "serial": 1, "lineage": "big", "outputs": {}, "resources": resources}
    answer = api.http.post(f"{api.o}/stacks/big/state", content=json.dumps(state))
    assert answer.status_code == 200, answer.text

    page = ui.open(ui.sizes[size])
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/stacks/big/state")
    rows = page.locator(".resources-table tr[data-address]")
    expect(page.get_by_test_id("resources-range")).to_have_text("1–100 of 10,000")
    expect(rows).to_have_count(100)
    expect(rows.first).to_have_attribute("data-address", "terraform_data.r00000")
    page.get_by_role("button", name="Next").click()
    expect(page.get_by_test_id("resources-range")).to_have_text("101–200 of 10,000")
    expect(rows.first).to_have_attribute("data-address", "terraform_data.r00100")
    assert SECRET not in page.content()
    ui.check_screen(page, f"{size}-stack-state-10000")
    assert ui.close() == []
