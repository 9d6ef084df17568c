"""Follow-ups by engagement: "delivered but did not click" among the fixed choices, and one
"tapped <button>" per quick reply of the campaign's template; each draft's segment reaches
exactly those people.

The campaign's template has the quick replies "Yes" and "Not now" and a URL button. Ana
tapped Yes and clicked; Bia tapped "not now" (another case); Caio's was delivered, nothing
more; Duda's failed.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus
from delivery.campaigns.follow_ups import (
    FOLLOW_UPS_BY_KEY,
    FollowUpError,
    campaign_follow_up,
    campaign_follow_ups,
    follow_up_counts,
)
from delivery.models import Click, MessageStatus
from delivery.segments.services import segment_match
from tests.factories import (
    make_campaign,
    make_contact,
    make_message,
    make_phone_number,
    make_template,
)
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db

BUTTONS = [
    {"index": 0, "type": "QUICK_REPLY", "text": "Yes"},
    {"index": 1, "type": "QUICK_REPLY", "text": "Not now"},
    {"index": 2, "type": "URL", "text": "Shop", "url": "https://example.com/{{1}}"},
]


@pytest.fixture
def sent() -> Campaign:
    number = make_phone_number()
    template = make_template(account=number.account, name="offer", buttons=BUTTONS)
    campaign = make_campaign(
        phone_number=number,
        template=template,
        status=CampaignStatus.COMPLETED,
        started_at=timezone.now(),
    )
    people = {}
    for i, (name, status) in enumerate(
        [
            ("ana", MessageStatus.READ),
            ("bia", MessageStatus.DELIVERED),
            ("caio", MessageStatus.DELIVERED),
            ("duda", MessageStatus.FAILED),
        ]
    ):
        contact = make_contact(phone=f"+5511{8000_0000 + i:08d}", name=name)
        message = make_message(campaign=campaign, to=contact.phone, contact=contact, status=status)
        people[name] = (contact, message)
    for name, text in (("ana", "Yes"), ("bia", "not now")):
        contact = people[name][0]
        InboundMessage.objects.create(
            wamid=f"wamid.tap.{name}",
            from_phone=contact.phone or "",
            type="button",
            text=text,
            button_payload=text,
            sent_at=timezone.now(),
            contact=contact,
            campaign=campaign,
            payload={},
        )
    Click.objects.create(message=people["ana"][1], campaign=campaign, clicked_at=timezone.now())
    return campaign


def reached(draft: Campaign) -> set[str]:
    segment = draft.segments.get()
    match = segment_match(segment.rules, sample=50)
    return {row["name"] for row in match.sample}


def test_the_choices_add_not_clicked_and_one_tap_per_quick_reply(sent: Campaign) -> None:
    keys = [f.key for f in campaign_follow_ups(sent)]
    assert "delivered_not_clicked" in FOLLOW_UPS_BY_KEY
    assert keys[-2:] == ["tapped:Yes", "tapped:Not now"]  # the URL button is no choice
    labels = {f.key: f.label for f in campaign_follow_ups(sent)}
    assert labels["delivered_not_clicked"] == "delivered but did not click"
    assert labels["tapped:Not now"] == "tapped “Not now”"


def test_the_counts_cover_every_choice(sent: Campaign) -> None:
    counts = follow_up_counts(campaign=sent)
    assert counts["delivered_not_clicked"] == 2  # Bia and Caio
    assert counts["tapped:Yes"] == 1
    assert counts["tapped:Not now"] == 1  # Bia's "not now", case aside
    assert set(counts) == {f.key for f in campaign_follow_ups(sent)}


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("delivered_not_clicked", {"bia", "caio"}),
        ("tapped:Yes", {"ana"}),
        ("tapped:Not now", {"bia"}),
        ("tapped:yes", {"ana"}),  # a key typed in another case still names the button
    ],
)
def test_a_follow_up_draft_reaches_exactly_those(
    sent: Campaign, key: str, expected: set[str]
) -> None:
    draft = campaign_follow_up(campaign=sent, key=key)
    assert draft.follow_up_of == sent
    assert draft.status == CampaignStatus.DRAFT
    assert reached(draft) == expected
    assert draft.segments.get().name.startswith(f"#{sent.pk} ")


def test_a_tap_follow_up_needs_a_button(sent: Any) -> None:
    with pytest.raises(FollowUpError, match="tapped:<button>"):
        campaign_follow_up(campaign=sent, key="tapped:  ")
