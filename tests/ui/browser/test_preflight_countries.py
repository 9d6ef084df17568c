"""A marketer reads a campaign's pre-flight check by country in a real browser, signed in
with the Marketing role (never a superuser), at 1366 px.

A marketing template to a list of US, Canadian, Jamaican and Brazilian numbers and one
contact known only by a US user id: the "By country" table shows the US skipped (numbers
and user id alike, Meta does not deliver marketing templates there), while Canada and
Jamaica, which share +1 with the US, are sent to. The page is saved to /tmp (not the repo).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from campaigns.models import Campaign, Contact, TemplateCategory
from tests.factories import (
    make_account,
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)
from tests.ui.browser.conftest import log_in
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

SCREENSHOT = "/tmp/preflight_countries.png"  # noqa: S108 - to look at, not to keep

US = [f"+121223456{i:02d}" for i in range(1, 5)]  # New York (212)
CA = [f"+141655501{i:02d}" for i in range(1, 4)]  # Toronto (416)
JM = [f"+187655501{i:02d}" for i in range(1, 3)]  # Jamaica (876)
BR = ["+5511987654301"]  # São Paulo


def draft_to_four_countries() -> Campaign:
    account = make_account()
    template = make_template(
        account=account, name="spring_sale", category=TemplateCategory.MARKETING
    )
    audience = make_contact_list(name="Americas")
    for n, phone in enumerate(US + CA + JM + BR):
        make_contact(phone=phone, name=f"Contact {n}", contact_list=audience)
    # make_contact gives every contact a phone: this one is known by its user id alone.
    user = make_contact(user_id="US.1001", name="User id only", contact_list=audience)
    Contact.objects.filter(pk=user.pk).update(phone=None)
    return make_campaign(
        name="Spring sale, Americas",
        phone_number=make_phone_number(account=account),
        template=template,
        lists=[audience],
    )


def test_a_marketers_preflight_shows_the_us_skipped_and_its_neighbours_sent_by_country(
    wide: Any, live_server: Any
) -> None:
    role_user(MARKETING)
    campaign = draft_to_four_countries()
    base = live_server.url
    log_in(wide, base, "mia")

    wide.goto(base + reverse("admin:campaigns_campaign_preflight", args=[campaign.pk]))
    wide.wait_for_selector("#wb-preflight-countries")

    def cells(region: str) -> list[str]:
        row = wide.locator(f"#wb-preflight-countries tr[data-region='{region}']")
        assert row.count() == 1, region
        return [c.strip() for c in row.locator("td").all_inner_texts()]

    # Columns after the country: Contacts, Will be sent, Skipped (and why).
    contacts, sent, skipped = cells("US")
    assert (contacts, sent) == ("5", "0")
    assert "US number" in skipped and "US user id" in skipped
    for region, count in (("CA", "3"), ("JM", "2"), ("BR", "1")):
        contacts, sent, skipped = cells(region)
        assert (contacts, sent, skipped) == (count, count, "-"), region

    assert wide.inner_text("#wb-us-blocked").strip() == "5"
    assert wide.inner_text("#wb-audience").strip() == "6"

    wide.screenshot(path=SCREENSHOT, full_page=True)


# A GIF header (the Marketing Messages API's animated media), which the send path does not
# build: the kind of template this version refuses, with the reason.
GIF_COMPONENTS = [
    {"type": "HEADER", "format": "GIF", "example": {"header_handle": ["4::aW..."]}},
    {"type": "BODY", "text": "Hi {{1}}, our sale starts now", "example": {"body_text": [["Ana"]]}},
]


def test_a_marketer_sees_why_a_template_cannot_be_launched(wide: Any, live_server: Any) -> None:
    """A synced template of a kind this version cannot send is refused at the pre-flight,
    which names the reason and offers no launch."""
    role_user(MARKETING)
    account = make_account()
    template = make_template(
        account=account,
        name="summer_gif",
        category=TemplateCategory.MARKETING,
        components=GIF_COMPONENTS,
        body_text=GIF_COMPONENTS[1]["text"],
        body_param_count=1,
    )
    audience = make_contact_list(name="Brazil")
    make_contact(phone="+5511987654301", name="Ana", contact_list=audience)
    campaign = make_campaign(
        name="Summer sale",
        phone_number=make_phone_number(account=account),
        template=template,
        lists=[audience],
        param_mapping={"body": {"1": {"field": "name"}}},
    )
    base = live_server.url
    log_in(wide, base, "mia")
    wide.goto(base + reverse("admin:campaigns_campaign_preflight", args=[campaign.pk]))
    findings = wide.inner_text("#wb-findings")
    assert "GIF headers are not supported yet" in findings
    assert wide.locator("#wb-launch-form").count() == 0
    assert "The launch would be refused" in wide.inner_text("#content-main")
