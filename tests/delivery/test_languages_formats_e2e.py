"""A carousel campaign in several languages, end to end on the simulator.

Three cards (pywa's published media-card carousel), a per-recipient coupon code in the
body, and three approved versions of the template: pt_BR, es_ES and en_US (the fallback).
Each recipient's version is chosen by their ``language`` field, else their number's
country, else the fallback; the simulator checks every send as Meta does (132012 on a
card count other than approved), and records what each recipient got.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from campaigns.catalogue.components import components_parse
from campaigns.models import Campaign, Contact, ContactList, ListMembership, Template
from delivery.campaigns.languages import NO_LANGUAGE
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.preflight import campaign_preflight
from delivery.campaigns.progress import campaign_by_language
from delivery.models import Message
from tests.engine_support import number_on, running_simulator, work_burst
from tests.factories import make_campaign, make_contact_list
from tests.ui.support import role_user

pytestmark = pytest.mark.django_db(transaction=True)

CAROUSEL = json.loads(
    (
        Path(__file__).resolve().parent.parent
        / "fixtures/real/templates_listing/pywa_carousel_media_cards.json"
    ).read_text()
)
MAPPING = {
    "body": {"1": {"field": "name"}, "2": {"value": "30%"}, "3": {"field": "coupon"}},
    "cards": [
        {
            "header": {"value": f"https://cdn.example/plant-{n}.jpg"},
            "buttons": {"0": {"value": f"more-{n}"}, "1": {"field": f"sku{n}"}},
        }
        for n in range(3)
    ],
}
# name, phone, language field, the version they must get
PEOPLE = [
    ("Ana", "+5511987650001", "pt_BR", "pt_BR"),
    ("Bruno", "+5511987650002", "", "pt_BR"),  # a Brazilian number, no field
    ("Carmen", "+34612345001", "es-ES", "es_ES"),
    ("Diego", "+34612345002", "", "es_ES"),  # a Spanish number
    ("Elena", "+4915112345001", "es", "es_ES"),  # German number, Spanish reader
    ("Frank", "+4915112345002", "", "en_US"),  # no match: the fallback
    ("Greta", "+4915112345003", "de", "en_US"),  # no German version: the fallback
    ("Hugo", "+33612345001", "pt", "pt_BR"),  # a bare "pt"
]


def versions(sim: Any, number: Any) -> Template:
    """The carousel approved in three languages, synced as Meta lists it."""
    parsed = components_parse(CAROUSEL["components"])
    made = {}
    for language in ("pt_BR", "es_ES", "en_US"):
        made[language] = Template.objects.create(
            account=number.account,
            name="succulents",
            language=language,
            category="MARKETING",
            components=CAROUSEL["components"],
            body_text=parsed.body_text,
            body_param_count=parsed.body_param_count,
            body_examples=parsed.body_examples,
            buttons=parsed.buttons,
            cards=parsed.cards,
        )
        sim.add_template(
            name="succulents",
            language=language,
            components=CAROUSEL["components"],
            category="MARKETING",
            waba_id=number.account.waba_id,
        )
    return made["en_US"]


def audience() -> ContactList:
    contact_list = make_contact_list(name="plant lovers")
    for index, (name, phone, language, _) in enumerate(PEOPLE):
        attributes = {
            "coupon": f"{name.upper()}{index}",
            **{f"sku{n}": f"{name}-{n}" for n in range(3)},
        }
        if language:
            attributes["language"] = language
        contact = Contact.objects.create(phone=phone, name=name, attributes=attributes)
        ListMembership.objects.create(contact_list=contact_list, contact=contact)
    return contact_list


def sent_bodies(sim: Any) -> dict[str, dict[str, Any]]:
    bodies = [json.loads(r["body"]) for r in sim.records(bodies=True) if r.get("body")]
    return {body["to"]: body for body in bodies if body.get("type") == "template"}


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_each_recipient_gets_their_language_their_code_and_all_three_cards() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        fallback = versions(sim, number)
        campaign = make_campaign(
            phone_number=number,
            template=fallback,
            lists=[audience()],
            param_mapping=MAPPING,
            languages=True,
            language_field="language",
            language_fallback="en_US",
        )
        report = campaign_preflight(campaign=campaign)
        assert report.ok, [f.text for f in report.errors]
        assert report.languages == {"en_US": 2, "es_ES": 3, "pt_BR": 3}
        assert report.no_language == 0
        campaign_start(campaign=campaign)
        work_burst()
        got = sent_bodies(sim)
        records = sim.records()
    states = Message.objects.filter(campaign=campaign).values_list(
        "status", "last_error_code", "last_error_details"
    )
    assert {state[0] for state in states} == {"sent"}, list(states)[:3]
    assert not [r for r in records if r.get("code") not in (None, "200")]
    assert len(got) == len(PEOPLE)  # one send each, none twice
    for index, (name, phone, _, language) in enumerate(PEOPLE):
        body = got[phone.lstrip("+")] if phone.lstrip("+") in got else got[phone]
        template = body["template"]
        assert template["language"]["code"] == language, name
        body_params = template["components"][0]["parameters"]
        assert [p["text"] for p in body_params] == [name, "30%", f"{name.upper()}{index}"]
        cards = template["components"][1]["cards"]
        assert [card["card_index"] for card in cards] == [0, 1, 2]
        url_suffixes = [card["components"][2]["parameters"][0]["text"] for card in cards]
        assert url_suffixes == [f"{name}-{n}" for n in range(3)]
    rows = {row["language"]: row for row in campaign_by_language(campaign=campaign)}
    assert {language: row["sent"] for language, row in rows.items()} == {
        "pt_BR": 3,
        "es_ES": 3,
        "en_US": 2,
    }
    client = Client()
    client.force_login(role_user("Marketing"))
    page = client.get(reverse("admin:campaigns_campaign_report", args=[campaign.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="wb-report-languages"' in html and "es_ES" in html and "pt_BR" in html


def test_without_a_fallback_the_unmatched_are_skipped_with_the_reason() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        pt = versions(sim, number)
        Template.objects.filter(language="en_US").update(status="PENDING")
        campaign: Campaign = make_campaign(
            phone_number=number,
            template=Template.objects.get(language="pt_BR", name=pt.name),
            lists=[audience()],
            param_mapping=MAPPING,
            languages=True,
        )
        report = campaign_preflight(campaign=campaign)
        assert report.languages == {"es_ES": 3, "pt_BR": 3}
        assert report.no_language == 2
        assert report.languages_left_out == {"en_US": "pending, not approved"}
        texts = [f.text for f in report.findings]
        assert any("2 recipient(s) have no approved language" in t for t in texts), texts
        campaign_start(campaign=campaign)
        skipped = Message.objects.filter(campaign=campaign, status="skipped")
        assert sorted(skipped.values_list("to", flat=True)) == ["+4915112345002", "+4915112345003"]
        assert set(skipped.values_list("skip_reason", flat=True)) == {NO_LANGUAGE}
