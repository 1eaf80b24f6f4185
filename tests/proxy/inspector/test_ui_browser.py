"""The web inspector in a real headless Chromium (Debian's /usr/bin/chromium, driven by Playwright):
log in, open the compacted conversation, check every panel rendered, expand a summary down to an
original message, and save screenshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.proxy.inspector.inspect_fixtures import ADMIN_KEY, Populated, UiServerFactory
from tests.proxy.inspector.inspect_scenario import ORIGINAL_TEXT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not CHROMIUM.exists(),
                                 reason="headless Chromium not installed at /usr/bin/chromium")]


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


async def test_inspector_in_a_real_browser(make_ui_server: UiServerFactory, populated: Populated,
                                           tmp_path: Path) -> None:
    from playwright.async_api import async_playwright

    server = await make_ui_server()
    base = str(server.make_url("/ui/"))
    sc = populated.scenario
    problems: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1360, "height": 1000})
            page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            await login_and_open(page, base, sc.conversation_id)
            await check_panels(page, sc)
            await page.screenshot(path=str(tmp_path / "inspector.png"), full_page=True)
            await expand_summary(page, sc.condensed.id)
            await page.screenshot(path=str(tmp_path / "inspector-expanded.png"))
        finally:
            await browser.close()
    assert_png(tmp_path / "inspector.png")
    assert_png(tmp_path / "inspector-expanded.png")
    # The unauthenticated first load answers 401 (the login form); anything else is a page defect.
    assert [p for p in problems if "401" not in p] == []


async def login_and_open(page: Any, base: str, conversation_id: str) -> None:
    await page.goto(base)
    await page.get_by_test_id("login-key").fill(ADMIN_KEY)
    await page.get_by_test_id("login-submit").click()
    await page.get_by_test_id("list-view").wait_for(state="visible")
    assert await page.get_by_test_id("conversation-row").count() == 2
    await page.get_by_test_id(f"open-{conversation_id}").click()
    await page.get_by_test_id("conversation-view").wait_for(state="visible")


async def check_panels(page: Any, sc: Any) -> None:
    assert await page.get_by_test_id("conv-title").text_content() == sc.conversation_id
    assert await page.get_by_test_id("occupancy-bar").count() == 6
    assert "4/5" in (await page.get_by_test_id("prefix-stability").text_content() or "")
    assert "billed input (estimate)" in (await page.get_by_test_id("cost").text_content() or "")
    assert await page.get_by_test_id("timeline-row").count() == 40
    assert await page.locator('[data-testid="timeline-row"][data-status="pinned"]').count() == 1
    assert await page.locator('[data-testid="timeline-row"][data-status="summarised"]').count() == 33
    assert await page.get_by_test_id("strip-message").count() == 40
    assert await page.get_by_test_id(f"summary-box-{sc.condensed.id}").count() == 1
    struck = page.get_by_test_id("anchor-superseded")
    assert await struck.count() == 1 and await struck.text_content() == "A-1001"
    assert await page.get_by_test_id("event-row").count() == 8


async def expand_summary(page: Any, summary_id: str) -> None:
    await page.get_by_test_id(f"summary-node-{summary_id}").click()
    panel = page.get_by_test_id("expand-panel")
    await panel.wait_for(state="visible")
    original = page.get_by_test_id("expanded-message").filter(has_text=ORIGINAL_TEXT)
    await original.wait_for(state="visible")
    assert await original.get_attribute("data-seq") == "2"
    assert await page.get_by_test_id("expanded-message").count() == 30
