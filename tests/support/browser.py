"""Browser tests: Debian's Chromium driven by Playwright against the served control plane.

Test modules load this as a plugin (`pytest_plugins = ["support.browser"]`) for the fixture `ui`:
Chromium on the UI that conftest's `server` serves. The UI must be
built into backend/firstlume/static/ first (`make frontend`; `make test` does it), and Chromium
must be at /usr/bin/chromium (scripts/ensure-test-services.sh installs it). Every screenshot
lands in test-artifacts/screenshots/.

`UI.check_screen` is what every screen must pass at every size: nothing scrolls sideways (the
document and the main content box), and axe-core (frontend/node_modules/axe-core, pinned in
package.json) finds no serious or critical accessibility violation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BUILT_UI = ROOT / "backend" / "firstlume" / "static" / "index.html"
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
AXE = ROOT / "frontend" / "node_modules" / "axe-core" / "axe.min.js"

# The sizes every screen is checked at: a laptop and a phone.
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
# The narrowest screen the UI is made for.
NARROWEST = {"width": 360, "height": 740}
SIZES = {"desktop": DESKTOP, "phone": PHONE, "narrowest": NARROWEST}

# Real Terraform runs take seconds; a UI assertion waits for them, never longer than this.
expect.set_options(timeout=60_000)


class UI:
    """Chromium on the served UI: each `open()` is a fresh browser profile (its own storage)."""

    sizes = SIZES

    def __init__(self, browser: Browser, server: LiveServer) -> None:
        self.browser = browser
        self.server = server
        self.pages: list[tuple[BrowserContext, Page, list[str]]] = []

    def open(self, viewport: dict[str, int] | None = None) -> Page:
        # A server over HTTPS has a test's own certificate authority, which Chromium does not know.
        context = self.browser.new_context(
            base_url=self.server.url,
            viewport=viewport or DESKTOP,
            ignore_https_errors=self.server.url.startswith("https:"),
        )
        context.set_default_timeout(30_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        self.pages.append((context, page, errors))
        return page

    def sign_in(self, page: Page, token: str, path: str = "/") -> None:
        page.goto(path)
        page.get_by_label("API token").fill(token)
        page.get_by_role("button", name="Sign in").click()
        # Signed in: the top bar (with the way to sign out, in a menu on a phone) replaces the form.
        expect(page.get_by_role("banner")).to_be_visible()
        expect(page.get_by_label("API token")).to_have_count(0)

    @staticmethod
    def screenshot(page: Page, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path))
        return path

    @staticmethod
    def horizontal_overflow(page: Page) -> dict[str, int]:
        """How far the document and the main content box scroll sideways (0 when they don't)."""
        return page.evaluate(
            """() => {
                const doc = document.documentElement;
                const main = document.querySelector('main');
                return {
                    document: doc.scrollWidth - doc.clientWidth,
                    main: main ? main.scrollWidth - main.clientWidth : 0,
                };
            }"""
        )

    @staticmethod
    def axe(page: Page) -> list[dict[str, Any]]:
        """axe-core's serious and critical violations on the page as it is now."""
        if not AXE.exists():
            pytest.fail(f"{AXE} is missing: run `make frontend` (npm ci installs axe-core)")
        if not page.evaluate("() => typeof window.axe !== 'undefined'"):
            page.add_script_tag(path=str(AXE))
        violations = page.evaluate(
            """async () => {
                const result = await axe.run(document, { resultTypes: ['violations'] });
                return result.violations
                    .filter(v => v.impact === 'serious' || v.impact === 'critical')
                    .map(v => ({ id: v.id, impact: v.impact, help: v.help,
                                 nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ': ' + n.failureSummary) }));
            }"""
        )
        return violations  # type: ignore[no-any-return]

    def check_screen(self, page: Page, name: str) -> Path:
        """No sideways scrolling, no serious accessibility violation; saves the screenshot (first,
        so that a failure can be looked at)."""
        path = self.screenshot(page, name)
        overflow = self.horizontal_overflow(page)
        assert all(v <= 0 for v in overflow.values()), f"{name} scrolls sideways by {overflow} px"
        violations = self.axe(page)
        assert violations == [], f"{name}: axe found\n" + json.dumps(violations, indent=2)
        return path

    def close(self) -> list[str]:
        """Closes every page; returns the uncaught errors they had."""
        errors = [error for _, _, page_errors in self.pages for error in page_errors]
        for context, _, _ in self.pages:
            context.close()
        return errors


@contextmanager
def browsing(server: LiveServer) -> Iterator[UI]:
    """Chromium on `server`'s UI; the pages' uncaught errors fail the test at the end."""
    if not BUILT_UI.exists():
        pytest.fail(
            f"The web UI is not built ({BUILT_UI} is missing): run `make frontend` (`make test` does)."
        )
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/ensure-test-services.sh installs Debian's chromium.")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        session = UI(browser, server)
        yield session
        errors = session.close()
        browser.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


@pytest.fixture
def ui(server: LiveServer) -> Iterator[UI]:
    # Playwright's sync API marks an event loop as running in this thread while it is started:
    # the database fixtures' asyncio.run() would then refuse to run. So the browser starts after
    # them (it depends on `server`) and stops before their teardown, once per test.
    with browsing(server) as session:
        yield session
