"""A phone number's access token is shown to nobody once saved: no role, no page.

Each role (Marketing, Support, Operators) and a superuser log in and open every admin page
they can reach from the index, following links, plus the pages that do not hang off a
link (the number's read-only view, history, test send, delete confirmation; the API's
description; metrics). The token appears in none of them; the pages that show the number
say only that a token is set.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.ui.crawl import Page, admin_crawl, world_populate
from tests.ui.support import SUPERUSER, role_or_superuser
from whatsblast.auth.roles import MARKETING, OPERATORS, SUPPORT

pytestmark = pytest.mark.django_db

TOKEN = "EAAGm0PZBw4zQBAKx7tDrmhN1sUz0ShFQ2OkKyAvZCDlVxJyTg"  # noqa: S105 - a test value
# Pieces a page might leak without the whole (an edit box cut short, a masked tail).
TOKEN_PIECES = (TOKEN, TOKEN[:16], TOKEN[-12:])


def _number_pages(number_id: int) -> list[str]:
    base = f"/admin/campaigns/phonenumber/{number_id}"
    return [
        f"{base}/change/",
        f"{base}/history/",
        f"{base}/test-send/",
        f"{base}/delete/",
        "/admin/campaigns/phonenumber/",
        "/admin/campaigns/businessaccount/",
    ]


def _assert_no_token(pages: dict[str, Any]) -> None:
    for url, page in pages.items():
        assert page.status != 500, url
        for piece in TOKEN_PIECES:
            assert piece not in page.body, f"{url} shows the access token"


@pytest.mark.parametrize("role", [MARKETING, SUPPORT, OPERATORS, SUPERUSER])
def test_no_page_shows_the_access_token_to_any_role(role: str) -> None:
    world = world_populate(token=TOKEN)
    user = role_or_superuser(role)
    client = Client()
    client.force_login(user)

    pages = admin_crawl(client)
    for url in [*_number_pages(world.ids["number"]), "/api/v1/openapi.json", "/metrics"]:
        response = client.get(url)
        pages[url] = Page(url, response.status_code, response.content.decode(errors="replace"))

    _assert_no_token(pages)
    number_page = pages[f"/admin/campaigns/phonenumber/{world.ids['number']}/change/"]
    if role in (OPERATORS, SUPERUSER):
        # Those who may change the number get an empty box to replace the token.
        assert number_page.status == 200
        assert 'name="access_token"' in number_page.body
        assert 'value="' + TOKEN[:4] not in number_page.body
    elif number_page.status == 200:
        assert "Set (never shown)." in number_page.body
        assert 'name="access_token"' not in number_page.body
    # The crawl did reach the pages that show the number and its account.
    reached = " ".join(pages)
    assert "/admin/campaigns/campaign/" in reached
    if role != SUPPORT:
        assert f"/admin/campaigns/campaign/{world.ids['campaign']}/change/" in pages


def test_the_token_is_stored_and_used_for_sends_but_prints_as_a_mask() -> None:
    from campaigns.models import PhoneNumber

    world = world_populate(token=TOKEN)
    number = PhoneNumber.objects.get(pk=world.ids["number"])

    assert number.access_token.reveal() == TOKEN
    assert TOKEN not in str(number.access_token)
    assert TOKEN not in repr(number.access_token)
    assert TOKEN not in f"{number.access_token}"
    assert TOKEN not in repr(number.__dict__)
    assert number.access_token == TOKEN
    deferred = PhoneNumber.objects.only("pk").get(pk=number.pk)
    assert deferred.access_token.reveal() == TOKEN


def test_dumped_data_holds_no_token() -> None:
    from io import StringIO

    from django.core.management import call_command

    world_populate(token=TOKEN)
    out = StringIO()

    call_command("dumpdata", "campaigns.phonenumber", stdout=out)

    assert TOKEN not in out.getvalue()
    assert "hidden" in out.getvalue()
