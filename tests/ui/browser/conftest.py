"""Browser tests of the admin UI: headless system Chromium against the live server.

Playwright's sync API runs an event loop in the test's thread, so Django's guard against
ORM calls from async code must be off for these tests (set before anything runs).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui.support import PASSWORD
from whatsblast.core.processes import ProcessGroup, service_environment

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _page(browser: Any, width: int, height: int) -> Iterator[Any]:
    context = browser.new_context(
        viewport={"width": width, "height": height}, accept_downloads=True
    )
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    yield from _page(browser, 1280, 860)


# The width the admin is tried at as people use it (a common laptop screen).
WIDE = 1366


@pytest.fixture
def wide(browser: Any) -> Iterator[Any]:
    """A page at 1366 px wide."""
    yield from _page(browser, WIDE, 900)


@pytest.fixture
def uploads(tmp_path: Path, settings: Any) -> Path:
    settings.CONTACT_UPLOAD_DIR = tmp_path / "uploads"
    return settings.CONTACT_UPLOAD_DIR


@pytest.fixture
def workers(tmp_path: Path, settings: Any, uploads: Path) -> Iterator[ProcessGroup]:
    """Real `manage.py rqworker` processes on this test run's database, Redis and uploads."""
    env = {
        **service_environment(),
        "CONTACT_UPLOAD_DIR": str(uploads),
        "DEBUG": "1",
        "LOG_LEVEL": "WARNING",
        "CAMPAIGN_JOB_BUDGET_SECONDS": "2",
    }
    group = ProcessGroup(tmp_path / "logs", env)
    try:
        yield group
    finally:
        group.stop()


def log_in(page: Any, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")


def screenshot(page: Any, name: str, *, full_page: bool = False) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=full_page)
