"""What every role meets: a refusal page with a way back, no traceback logged for it, no
"View site" link to nowhere, and the sidebar's names spelled right."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client

from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING, SUPPORT

pytestmark = pytest.mark.django_db


def client_for(role: str) -> Client:
    client = Client()
    client.force_login(role_user(role))
    return client


def test_a_refusal_is_an_admin_page_with_a_way_back_and_no_traceback_in_the_log(
    caplog: Any,
) -> None:
    marketer = client_for(MARKETING)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = marketer.get(
            "/admin/delivery/deadletter/", HTTP_REFERER="http://testserver/admin/campaigns/"
        )
    assert response.status_code == 403
    page = response.content.decode()
    assert "You don&#x27;t have access to this page" in page or "have access" in page
    assert 'id="wb-back" href="http://testserver/admin/campaigns/"' in page
    assert 'id="user-tools"' in page and "mia" in page  # the admin's header, signed in
    refused = [r for r in caplog.records if getattr(r, "status_code", None) == 403]
    assert refused and all(r.exc_info is None for r in refused)


def test_a_refusal_never_links_back_to_another_site() -> None:
    response = client_for(MARKETING).get(
        "/admin/delivery/deadletter/", HTTP_REFERER="https://evil.example/phish"
    )
    assert 'id="wb-back" href="/admin/"' in response.content.decode()


def test_no_view_site_link_and_the_sidebar_spells_unmatched_statuses() -> None:
    page = client_for(SUPPORT).get("/admin/").content.decode()
    assert "View site" not in page
    assert "Unmatched statuses" in page and "statuss" not in page


def test_times_follow_the_zone_kept_on_the_viewers_account_in_one_format(
    settings: Any,
) -> None:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.factories import make_campaign
    from whatsblast.models import Preferences

    make_campaign(
        name="Zoned",
        status="completed",
        started_at=datetime(2026, 12, 1, 11, 2, tzinfo=ZoneInfo("UTC")),
    )
    user = role_user(MARKETING)
    marketer = Client()
    marketer.force_login(user)
    page = marketer.get("/admin/campaigns/campaign/").content.decode()
    assert "started 2026-12-01 11:02" in page and "Times: UTC" in page
    form = marketer.get("/admin/preferences/?next=/admin/").content.decode()
    assert "My preferences" in form and 'placeholder="UTC (the default)"' in form

    saved = marketer.post(
        "/admin/preferences/", {"time_zone": "America/Sao_Paulo", "next": "/admin/"}
    )
    assert saved.status_code == 302 and saved["Location"] == "/admin/"
    assert Preferences.objects.get(user=user).time_zone == "America/Sao_Paulo"
    with CaptureQueriesContext(connection) as queries:
        page = marketer.get("/admin/campaigns/campaign/").content.decode()
    assert "started 2026-12-01 08:02" in page and "Times: America/Sao_Paulo" in page
    # Read from the session: the zone costs the page no query.
    assert not [q for q in queries.captured_queries if "whatsblast_preferences" in q["sql"]]

    # A new sign-in (another browser) reads the zone from the account.
    again = Client()
    again.force_login(user)
    page = again.get("/admin/campaigns/campaign/").content.decode()
    assert "started 2026-12-01 08:02" in page and "Times: America/Sao_Paulo" in page

    refused = marketer.post("/admin/preferences/", {"time_zone": "Mars/Olympus"})
    assert refused.status_code == 200 and "is not a time zone" in refused.content.decode()
    assert Preferences.objects.get(user=user).time_zone == "America/Sao_Paulo"

    # Someone who has not chosen reads the site's default; blank goes back to it.
    settings.DISPLAY_TIME_ZONE = "Europe/Lisbon"
    support = client_for(SUPPORT)
    assert "Times: Europe/Lisbon" in support.get("/admin/").content.decode()
    marketer.post("/admin/preferences/", {"time_zone": "", "next": "/admin/"})
    page = marketer.get("/admin/campaigns/campaign/").content.decode()
    assert "started 2026-12-01 11:02" in page and "Times: Europe/Lisbon" in page


def test_stored_json_is_shown_as_tables_and_contact_fields_as_lines() -> None:
    from campaigns.models import Contact
    from tests.factories import make_campaign, make_contact
    from tests.ui.support import dead_message

    campaign = make_campaign(
        status="completed",
        param_mapping={"body": {"1": {"field": "name", "fallback": "there"}, "2": {"value": "X1"}}},
    )
    letter = dead_message(campaign=campaign)
    support = client_for(SUPPORT)
    page = support.get(f"/admin/campaigns/campaign/{campaign.pk}/change/").content.decode()
    assert 'id="wb-mapping-table"' in page
    assert "contact field “name”, or “there” when a contact has none" in page
    assert "the text “X1” for everyone" in page
    page = support.get(f"/admin/delivery/message/{letter.message_id}/change/").content.decode()
    assert '<table class="wb-rows">' in page and "attempt 2 failed" in page
    assert "&quot;http_status&quot;" not in page and '"http_status"' not in page

    marketer = client_for(MARKETING)
    contact = make_contact(name="Ana", attributes={"coupon": "A1", "city": "Recife"})
    page = marketer.get(f"/admin/campaigns/contact/{contact.pk}/change/").content.decode()
    assert "coupon = A1" in page and "city = Recife" in page and "{&quot;" not in page
    response = marketer.post(
        f"/admin/campaigns/contact/{contact.pk}/change/",
        {"phone": contact.phone, "name": "Ana", "attributes": "coupon = B2\n\nshop = Lojas Dias"},
    )
    assert response.status_code == 302
    assert Contact.objects.get(pk=contact.pk).attributes == {"coupon": "B2", "shop": "Lojas Dias"}
    bad = marketer.post(
        f"/admin/campaigns/contact/{contact.pk}/change/",
        {"phone": contact.phone, "name": "Ana", "attributes": "just text"},
    )
    assert "Line 1: write it as name = value." in bad.content.decode()
