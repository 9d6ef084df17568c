"""Segments over engagement: who tapped a quick reply (by its text, any case), who clicked
(people, not link-preview fetchers), who got it and did not click, who converted; and
each bad rule refused with its path. Real PostgreSQL.

Campaign "promo" reached five people: Ana tapped "Yes" and clicked; Bia tapped "no thanks"
and a preview fetcher opened her link (not a person); Caio's was delivered and he clicked
with the click naming only him; Duda read it and converted; Edu's failed. Another campaign
has its own tap, click and conversion by Edu, which must not leak into "promo".
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.utils import timezone

from campaigns.models import Campaign, Contact
from delivery.models import Click, Conversion, Message, MessageStatus
from delivery.segments.rules import RuleError
from delivery.segments.services import segment_match
from tests.factories import make_campaign, make_contact, make_message, make_template
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db

_seq = itertools.count()
STATUSES = {
    "ana": MessageStatus.READ,
    "bia": MessageStatus.DELIVERED,
    "caio": MessageStatus.DELIVERED,
    "duda": MessageStatus.READ,
    "edu": MessageStatus.FAILED,
}


def tapped(contact: Contact, campaign: Campaign, text: str, kind: str = "button") -> None:
    InboundMessage.objects.create(
        wamid=f"wamid.in.{next(_seq)}",
        from_phone=contact.phone or "",
        type=kind,
        text=text,
        button_payload=text,
        sent_at=timezone.now(),
        contact=contact,
        campaign=campaign,
        payload={},
    )


def clicked(message: Message | None, campaign: Campaign, **fields: Any) -> None:
    Click.objects.create(message=message, campaign=campaign, clicked_at=timezone.now(), **fields)


def converted(contact: Contact, campaign: Campaign) -> None:
    Conversion.objects.create(
        contact=contact,
        phone=contact.phone or "",
        event="purchase",
        occurred_at=timezone.now(),
        source="api",
        dedupe_key=f"k{next(_seq)}",
        campaign=campaign,
        attributed_by="delivered",
    )


@pytest.fixture
def world() -> dict[str, Any]:
    people = {
        name: make_contact(phone=f"+5511{9000_0000 + i:08d}", name=name)
        for i, name in enumerate(STATUSES)
    }
    promo = make_campaign(name="promo")
    other = make_campaign(
        phone_number=promo.phone_number,
        template=make_template(account=promo.phone_number.account, name="other"),
    )
    messages = {
        name: make_message(campaign=promo, to=c.phone, contact=c, status=STATUSES[name])
        for name, c in people.items()
    }
    edu_other = make_message(
        campaign=other, to=people["edu"].phone, contact=people["edu"], status="read"
    )
    tapped(people["ana"], promo, "Yes")
    tapped(people["bia"], promo, "No thanks")
    tapped(people["ana"], promo, "yes please", kind="text")  # a text, not a tap
    clicked(messages["ana"], promo)
    clicked(messages["bia"], promo, is_preview=True)
    clicked(None, promo, contact=people["caio"])
    converted(people["duda"], promo)
    tapped(people["edu"], other, "Yes")
    clicked(edu_other, other)
    converted(people["edu"], other)
    return {"people": people, "promo": promo, "other": other}


def names(rules: object, world: dict[str, Any]) -> set[str]:
    ids = {c.pk: name for name, c in world["people"].items()}
    match = segment_match(rules, sample=100)
    assert match.count == len(match.sample)
    return {ids[row["id"]] for row in match.sample}


@pytest.mark.parametrize(
    ("outcome", "button", "expected"),
    [
        ("tapped", "Yes", {"ana"}),
        ("tapped", "YES", {"ana"}),  # case-insensitive
        ("tapped", "  no THANKS ", {"bia"}),  # trimmed too
        ("tapped", "Maybe", set()),
        ("clicked", None, {"ana", "caio"}),  # Bia's was a preview fetcher
        ("delivered_not_clicked", None, {"bia", "duda"}),
        ("converted", None, {"duda"}),
    ],
)
def test_each_engagement_outcome_matches_exactly(
    world: dict[str, Any], outcome: str, button: str | None, expected: set[str]
) -> None:
    rule: dict[str, Any] = {"campaign": world["promo"].pk, "outcome": outcome}
    if button is not None:
        rule["button"] = button
    assert names(rule, world) == expected


def test_clicked_and_delivered_not_clicked_split_the_delivered(world: dict[str, Any]) -> None:
    promo = world["promo"].pk
    delivered = names({"campaign": promo, "outcome": "delivered"}, world)
    clicked_ = names({"campaign": promo, "outcome": "clicked"}, world)
    not_clicked = names({"campaign": promo, "outcome": "delivered_not_clicked"}, world)
    assert delivered == {"ana", "bia", "caio", "duda"}
    assert clicked_ & not_clicked == set()
    assert clicked_ | not_clicked == delivered


def test_engagement_outcomes_compose_under_not_and_any(world: dict[str, Any]) -> None:
    promo = world["promo"].pk
    rules = {
        "all": [
            {"campaign": promo, "outcome": "delivered"},
            {"not": {"campaign": promo, "outcome": "tapped", "button": "yes"}},
            {
                "any": [
                    {"campaign": promo, "outcome": "converted"},
                    {"campaign": promo, "outcome": "clicked"},
                ]
            },
        ]
    }
    assert names(rules, world) == {"caio", "duda"}
    # The other campaign's engagement stays its own.
    other = world["other"].pk
    assert names({"campaign": other, "outcome": "tapped", "button": "Yes"}, world) == {"edu"}
    assert names({"campaign": other, "outcome": "converted"}, world) == {"edu"}


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"campaign": 1, "outcome": "tapped"}, "rules.button: names the quick reply tapped"),
        ({"campaign": 1, "outcome": "tapped", "button": "  "}, "rules.button: names the quick"),
        ({"campaign": 1, "outcome": "tapped", "button": 3}, "rules.button: names the quick"),
        (
            {"campaign": 1, "outcome": "tapped", "button": "x" * 201},
            "rules.button: is a button's text, at most 200",
        ),
        (
            {"campaign": 1, "outcome": "clicked", "button": "Yes"},
            "rules.button: is only for the outcome 'tapped'",
        ),
        (
            {"all": [{"not": {"campaign": 1, "outcome": "converted", "button": "x"}}]},
            "rules.all[0].not.button: is only for the outcome 'tapped'",
        ),
        (
            {"campaign": 1, "outcome": "tapped", "button": "Yes", "text": "x"},
            "rules: unexpected 'text'",
        ),
        ({"campaign": 1, "outcome": "bounced"}, "rules.outcome: is one of not_sent"),
    ],
)
def test_a_bad_engagement_rule_is_refused_naming_its_path(rules: object, message: str) -> None:
    with pytest.raises(RuleError) as caught:
        segment_match(rules)
    assert str(caught.value).startswith(message)


def test_the_outcome_list_names_the_new_outcomes() -> None:
    with pytest.raises(RuleError) as caught:
        segment_match({"campaign": 1, "outcome": "nope"})
    for outcome in ("tapped", "clicked", "delivered_not_clicked", "converted"):
        assert outcome in str(caught.value)
