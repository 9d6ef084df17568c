"""A marketer chooses the zone times are shown in; it is kept on their account.

Signed in as Marketing (never a superuser): open "My preferences" from the header, pick a
zone, read the campaign page's times in it; then sign in again from a new browser context
(no cookies, a new session) and find the same zone.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.factories import make_campaign
from tests.ui.browser.conftest import log_in, screenshot
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING
from whatsblast.models import Preferences

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

STARTED = datetime(2026, 12, 1, 11, 2, tzinfo=ZoneInfo("UTC"))
COMPLETED = datetime(2026, 12, 1, 12, 30, tzinfo=ZoneInfo("UTC"))


def _zone(page: Any) -> str:
    return str(page.text_content("#wb-time-zone") or "").strip()  # as written, not styled


def _times(page: Any) -> tuple[str, str]:
    # text_content: the run's fieldset may be folded away.
    return (
        str(page.text_content(".field-started_at .readonly") or "").strip(),
        str(page.text_content(".field-completed_at .readonly") or "").strip(),
    )


def test_a_marketers_time_zone_is_kept_on_the_account_across_sign_ins(
    browser: Any, live_server: Any
) -> None:
    campaign = make_campaign(
        name="Black Friday", status="completed", started_at=STARTED, completed_at=COMPLETED
    )
    user = role_user(MARKETING)
    campaign_url = f"{live_server.url}/admin/campaigns/campaign/{campaign.pk}/change/"

    first = browser.new_context(viewport={"width": 1366, "height": 860})
    page = first.new_page()
    page.set_default_timeout(20_000)
    log_in(page, live_server.url, user.username)
    page.goto(campaign_url)
    assert _zone(page) == "Times: UTC"
    assert _times(page) == ("2026-12-01 11:02 UTC", "2026-12-01 12:30 UTC")

    page.click("#wb-time-zone")  # the header link opens My preferences
    page.wait_for_selector("#preferences-form")
    assert "My preferences" in page.title()
    page.fill("#id_time_zone", "Asia/Kolkata")
    screenshot(page, "my-preferences.png")
    page.click("#preferences-form input[type=submit]")
    page.wait_for_url(campaign_url)  # back where they were
    assert _zone(page) == "Times: Asia/Kolkata"
    assert _times(page) == ("2026-12-01 16:32 IST", "2026-12-01 18:00 IST")  # UTC+5:30
    first.close()
    assert Preferences.objects.get(user=user).time_zone == "Asia/Kolkata"

    # Another browser: no cookie of the first one; the zone comes from the account.
    second = browser.new_context(viewport={"width": 1366, "height": 860})
    try:
        again = second.new_page()
        again.set_default_timeout(20_000)
        assert second.cookies() == []
        log_in(again, live_server.url, user.username)
        again.goto(campaign_url)
        assert _zone(again) == "Times: Asia/Kolkata"
        assert _times(again) == ("2026-12-01 16:32 IST", "2026-12-01 18:00 IST")
    finally:
        second.close()
