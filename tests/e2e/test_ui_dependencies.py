"""Browser: the dependency graph of 30 stacks, each coloured by its last run's status (planned,
failed, none), and a stack's upstream and downstream reached by keyboard alone; a stack's
Dependencies tab. Pinned to SQLite, as the other browser tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import Page, expect

from conftest import LiveServer, Tenant
from support.e2e import Api, StackRepo
from support.git_repos import make_repo

if TYPE_CHECKING:
    from support.browser import UI

pytest_plugins = ["support.browser"]
pytestmark = [pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

CODE = 'resource "terraform_data" "x" { input = "x" }\noutput "id" { value = terraform_data.x.output }\n'
SERVICES = [f"svc-{n:02}" for n in range(1, 28)]


def depend(api: Api, stack: str, upstream: str) -> None:
    body = {"depends_on": [{"stack": upstream, "outputs": {"id": "upstream_id"}}]}
    response = api.http.put(f"{api.o}/stacks/{stack}/dependencies", content=json.dumps(body))
    assert response.status_code == 200, response.text


@pytest.fixture
def thirty(api: Api, tmp_path: Path, terraform_binary: str) -> dict[str, str]:
    """network → cluster → app, and 27 services reading cluster or app; network's last run
    planned, cluster's failed, the others never ran."""
    url, _ = make_repo(tmp_path / "repo", {"infra/main.tf": CODE})
    real = StackRepo(path=tmp_path / "repo", url=url, state_path=tmp_path / "no-state")
    api.create_stack("network", real)
    broken = StackRepo(path=tmp_path / "none", url=(tmp_path / "none").as_uri(), state_path=tmp_path / "x")
    for slug in ["cluster", "app", *SERVICES]:
        api.create_stack(slug, broken)
    depend(api, "cluster", "network")
    depend(api, "app", "cluster")
    for n, slug in enumerate(SERVICES):
        depend(api, slug, "cluster" if n % 2 else "app")
    planned = api.wait(api.start("network", "plan"), "planned")
    failed = api.wait(api.start("cluster", "plan"), "failed")
    return {"planned": planned["id"], "failed": failed["id"]}


def focused_stack(page: Page) -> str | None:
    return page.evaluate(
        "() => document.activeElement?.dataset?.stack ?? document.activeElement?.dataset?.neighbour ?? null"
    )


def tab_to(page: Page, selector: str, limit: int = 80) -> None:
    """Presses Tab until the element matching `selector` has the focus (keyboard only)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement?.matches(s) ?? false", selector):
            return
    raise AssertionError(f"{selector} was not reached with {limit} presses of Tab")


def test_the_graph_colours_thirty_stacks_and_reaches_neighbours_by_keyboard(
    ui: UI, server: LiveServer, tenant: Tenant, api: Api, thirty: dict[str, str]
) -> None:
    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/dependencies")
    expect(page).to_have_title(f"Dependencies · {tenant.org} · Firstlume")
    nodes = page.locator("button.graph-node")
    expect(nodes).to_have_count(30)
    network = page.locator("button[data-stack='network']")
    expect(network).to_have_attribute("data-status", "PLANNED")
    expect(network).to_have_class("graph-node tone-border-success")
    expect(network).to_contain_text("planned")
    cluster = page.locator("button[data-stack='cluster']")
    expect(cluster).to_have_attribute("data-status", "FAILED")
    expect(cluster).to_have_class("graph-node tone-border-danger")
    expect(page.locator("button[data-stack='svc-01']")).to_have_attribute("data-status", "NONE")
    # The colours differ as computed, not only as class names.
    colours = {
        slug: page.locator(f"button[data-stack='{slug}']").evaluate(
            "(e) => getComputedStyle(e).borderTopColor"
        )
        for slug in ("network", "cluster", "svc-01")
    }
    assert len(set(colours.values())) == 3, colours

    # Keyboard only: Tab to cluster, Enter, then Tab to its upstream and follow it.
    tab_to(page, "button[data-stack='cluster']")
    page.keyboard.press("Enter")
    expect(cluster).to_have_attribute("aria-pressed", "true")
    panel = page.get_by_test_id("dependency-panel")
    expect(panel.get_by_role("list", name="Upstream stacks")).to_contain_text("network")
    downstream = panel.get_by_role("list", name="Downstream stacks").locator("button")
    expect(downstream).to_have_count(1 + len(SERVICES) // 2)
    tab_to(page, "button[data-neighbour='network']")
    page.keyboard.press("Enter")
    expect(network).to_have_attribute("aria-pressed", "true")
    expect(network).to_be_focused()
    expect(panel.get_by_role("list", name="Downstream stacks").locator("button")).to_have_text(["cluster"])
    tab_to(page, "button[data-neighbour='cluster']")
    page.keyboard.press("Enter")
    expect(cluster).to_be_focused()
    tab_to(page, "button[data-neighbour='app']")
    page.keyboard.press("Enter")
    expect(page.locator("button[data-stack='app']")).to_be_focused()
    expect(panel.get_by_role("list", name="Upstream stacks")).to_contain_text("cluster")
    ui.check_screen(page, "desktop-dependencies")

    # A stack's own tab: what it reads and who reads it.
    page.goto(f"/orgs/{tenant.org}/stacks/cluster/dependencies")
    expect(page).to_have_title("Dependencies · cluster · Stacks · Firstlume")
    expect(page.get_by_test_id("upstream")).to_contain_text("network")
    expect(page.get_by_test_id("downstream").locator("li")).to_have_count(1 + len(SERVICES) // 2)
    ui.check_screen(page, "desktop-stack-dependencies")

    # On a phone the graph scrolls inside its card, and the panel follows it.
    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, f"/orgs/{tenant.org}/dependencies")
    expect(phone.locator("button.graph-node")).to_have_count(30)
    phone.locator("button[data-stack='network']").click()
    expect(phone.get_by_test_id("dependency-panel")).to_contain_text("cluster")
    ui.check_screen(phone, "phone-dependencies")
    assert ui.close() == []
