"""Take the README's screenshots from a running demo with headless Chromium.

./scripts/demo &            # wait a minute or two so jobs run and a fault shows
.venv/bin/python docs/screenshots.py [--base http://127.0.0.1:8000]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def login(page: Page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("form [type=submit]")
    page.wait_for_url(f"{base}/")


def shot(page: Page, name: str, *, full_page: bool = False) -> None:
    page.wait_for_timeout(1500)  # let the live snapshot and charts draw
    path = ROOT / "docs" / "img" / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    print(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--credentials", default=str(ROOT / ".demo" / "credentials.json"))
    parser.add_argument("--lang", default="en")
    opts = parser.parse_args()
    creds = json.loads(Path(opts.credentials).read_text())
    base = opts.base
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        ctx = browser.new_context(viewport={"width": 1280, "height": 860}, locale=opts.lang)
        page = ctx.new_page()
        login(page, base, "admin", creds["admin"])
        shot(page, "overview")
        page.goto(f"{base}/inventory/nodes/?q=rig01")
        page.get_by_role("link", name="rig01", exact=True).first.click()
        page.wait_for_load_state()
        shot(page, "node", full_page=True)
        page.goto(f"{base}/inventory/fabrics/")
        page.get_by_role("link", name=re.compile("rig-01")).first.click()
        page.wait_for_load_state()
        shot(page, "fabric")
        researcher = browser.new_context(viewport={"width": 1280, "height": 860}, locale=opts.lang).new_page()
        login(researcher, base, "researcher", creds["researcher"])
        researcher.goto(f"{base}/jobs/")
        shot(researcher, "my-jobs")
        browser.close()


if __name__ == "__main__":
    main()
