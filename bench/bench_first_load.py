"""P15: the web UI's first load on a slow link (issue 48, item 15).

    .venv/bin/python bench/bench_first_load.py [REPEAT]

Serves the control plane (SQLite, the built UI from backend/firstlume/static: `make frontend`)
with an organization of 20 stacks, then opens its stacks screen in Debian's Chromium (Playwright)
with an empty cache, REPEAT times (default 5) on each of two links:

- throttled: 1.6 Mbit/s down, 750 kbit/s up, 150 ms round trip (Chrome DevTools Protocol
  Network.emulateNetworkConditions; the "slow 4G" of Lighthouse's mobile runs);
- the floor, in the same run: the same screen on the unthrottled loopback.

"Interactive" is when the screen's heading is drawn and nothing on it is still loading (its data
arrived, React has rendered with its handlers), timed in the page from the navigation's start.
Also printed: the bytes the first load transferred (compressed, as sent) and the compressed size
of the whole bundle (every script and stylesheet the build holds, gzip as served). The target:
interactive under 2.5 s on the throttled link. Prints figures; never fails on a slow machine.
"""

from __future__ import annotations

import asyncio
import gzip
import statistics
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright
from served import context, environment, seed, served

from firstlume.db.migrate import upgrade

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "backend" / "firstlume" / "static"
CHROMIUM = "/usr/bin/chromium"
STACKS = tuple(f"stack-{i:02d}" for i in range(20))
TARGET_S = 2.5
# 1.6 Mbit/s down and 750 kbit/s up in bytes per second, 150 ms round trip.
THROTTLED = {
    "offline": False,
    "latency": 150,
    "downloadThroughput": 1_600_000 / 8,
    "uploadThroughput": 750_000 / 8,
}

# Records, in the page, the first moment the screen is usable: its heading drawn and no
# "Loading …" left in the main column. Checked every frame from the document's start.
READY_PROBE = """
(() => {
  const check = () => {
    const main = document.querySelector('main');
    if (main && main.querySelector('h1') && !main.querySelector('.loading')) {
      window.__interactive = performance.now();
      return;
    }
    requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})();
"""


def bundle_gzip_bytes() -> tuple[int, int]:
    """The raw and gzip sizes (level 9, as api/spa.py serves them) of every script and stylesheet."""
    raw = packed = 0
    for path in sorted((STATIC / "assets").iterdir()):
        if path.suffix in (".js", ".css"):
            data = path.read_bytes()
            raw += len(data)
            packed += len(gzip.compress(data, compresslevel=9, mtime=0))
    return raw, packed


def first_load(browser: Browser, url: str, token: str, throttled: bool) -> tuple[float, int]:
    """One cold load of the stacks screen: seconds to interactive, bytes transferred."""
    page_context = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        page_context.add_init_script(f"localStorage.setItem('firstlume.token', {token!r});")
        page_context.add_init_script(READY_PROBE)
        page = page_context.new_page()
        cdp = page_context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
        if throttled:
            cdp.send("Network.emulateNetworkConditions", THROTTLED)
        transferred: list[int] = []
        cdp.on("Network.loadingFinished", lambda event: transferred.append(int(event["encodedDataLength"])))
        page.goto(f"{url}/orgs/bench/stacks", wait_until="commit")
        page.wait_for_function("() => window.__interactive !== undefined", timeout=60_000)
        interactive_ms = float(page.evaluate("() => window.__interactive"))
        return interactive_ms / 1000, sum(transferred)
    finally:
        page_context.close()


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):5.2f} s  min {min(values):5.2f} s  max {max(values):5.2f} s"


async def prepare(url: str, data_dir: Path) -> str:
    async with context(url, data_dir) as ctx:
        tenant = await seed(ctx, STACKS)
    return tenant.token


def main(repeat: int) -> None:
    if not (STATIC / "index.html").is_file():
        sys.exit("The web UI is not built: run `make frontend` first.")
    raw, packed = bundle_gzip_bytes()
    print(f"bundle: {raw / 1024:,.0f} KiB of scripts and styles, {packed / 1024:,.0f} KiB gzip-compressed")

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        url = f"sqlite+aiosqlite:///{tmp}/bench.db"
        upgrade(url)
        token = asyncio.run(prepare(url, data_dir / "data"))
        with served(environment(url, data_dir / "data")) as server, sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            try:
                first_load(browser, server.url, token, throttled=False)  # warm the server's caches
                results: dict[bool, list[tuple[float, int]]] = {True: [], False: []}
                for _ in range(repeat):
                    for throttled in (True, False):
                        results[throttled].append(first_load(browser, server.url, token, throttled))
            finally:
                browser.close()
    slow = [seconds for seconds, _ in results[True]]
    fast = [seconds for seconds, _ in results[False]]
    sent = statistics.median([size for _, size in results[True]])
    print(f"first load of the stacks screen ({len(STACKS)} stacks), cold cache, {repeat} runs each:")
    print(f"  transferred: {sent / 1024:,.0f} KiB (compressed, as sent)")
    print(f"  throttled 1.6 Mbit/s, 150 ms RTT: interactive {summary(slow)}")
    print(f"  floor, unthrottled loopback:      interactive {summary(fast)}")
    verdict = "met" if statistics.median(slow) < TARGET_S else "NOT met"
    print(f"  target: interactive under {TARGET_S} s on the throttled link: {verdict}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
