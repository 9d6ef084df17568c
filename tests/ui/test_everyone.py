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
