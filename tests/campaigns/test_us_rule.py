"""Meta's pause of marketing templates to US users: +1 *and* a US area code, or a ``US.`` user
id. Canada and the Caribbean share +1 and are sent; every skipped row says why, and the
pre-flight says so by country. Meta's refusal of some templates for user ids (131062) is
caught by the same rules before a send."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import override_settings

from campaigns.audience.regions import is_us_recipient, recipient_region, us_area_prefixes
from campaigns.models import Campaign, Contact, ContactList, TemplateCategory
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.preflight import campaign_preflight
from delivery.campaigns.pricing import campaign_cost_estimate
from delivery.campaigns.skips import (
    OPTED_OUT,
    US_NUMBER,
    US_USER_ID,
    USER_ID_REFUSED,
    SkipRules,
    user_id_refusal,
)
from delivery.models import Message
from delivery.simulator.us_pause import us_marketing_failure
from tests.engine_support import number_on, running_simulator, work_burst
from tests.factories import (
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)

OPTED_OUT_AT = datetime(2026, 1, 1, tzinfo=UTC)
US_AREAS = (212, 202, 415, 305, 312, 617, 713, 206)  # New York … Seattle
CANADA_AREAS = (416, 604, 514)  # Toronto, Vancouver, Montreal
CARIBBEAN_AREAS = (876, 809)  # Jamaica, Dominican Republic


def north_american_and_brazilian_list() -> tuple[ContactList, dict[str, list[str]]]:
    """40 US, 30 Canadian, 20 Caribbean and 10 Brazilian numbers, as the issue tried them."""
    contact_list = make_contact_list()
    phones: dict[str, list[str]] = {"US": [], "CA": [], "CB": [], "BR": []}
    for i in range(40):
        phones["US"].append(f"+1{US_AREAS[i % len(US_AREAS)]}23{i:05d}")
    for i in range(30):
        phones["CA"].append(f"+1{CANADA_AREAS[i % len(CANADA_AREAS)]}555{i:04d}")
    for i in range(20):
        phones["CB"].append(f"+1{CARIBBEAN_AREAS[i % len(CARIBBEAN_AREAS)]}555{i:04d}")
    for i in range(10):
        phones["BR"].append(f"+55119876543{i:02d}")
    for group in phones.values():
        for phone in group:
            make_contact(phone=phone, name="Ana", contact_list=contact_list)
    return contact_list, phones


def marketing_campaign(contact_list: ContactList, **template_fields: Any) -> Campaign:
    number = make_phone_number()
    template = make_template(
        account=number.account, category=TemplateCategory.MARKETING, **template_fields
    )
    return make_campaign(phone_number=number, template=template, lists=[contact_list])


def test_the_regions_of_north_american_numbers_come_from_their_area_codes() -> None:
    assert recipient_region("+14165550100") == "CA"
    assert recipient_region("+16045550100") == "CA"
    assert recipient_region("+18765550100") == "JM"
    assert recipient_region("+18095550100") == "DO"
    assert recipient_region("+12122345678") == "US"
    assert recipient_region("+5511987654321") == "BR"
    assert recipient_region("US.13491208655302741918") == "US"
    assert recipient_region("US.ENT.11815799212886844830") == "US"
    assert recipient_region("BR.13491208655302741918") == "BR"
    assert not is_us_recipient("+14165550100") and is_us_recipient("+12122345678")
    # 555 is no area code: nothing places it, so it is no US number.
    assert recipient_region("+15555550100") is None
    prefixes = us_area_prefixes()
    assert "+1212" in prefixes and "+1416" not in prefixes and "+1876" not in prefixes


@pytest.mark.django_db
def test_a_marketing_campaign_skips_us_numbers_and_sends_canada_and_the_caribbean() -> None:
    contact_list, phones = north_american_and_brazilian_list()
    campaign = marketing_campaign(contact_list)

    report = campaign_preflight(campaign=campaign)
    assert (report.contacts, report.us_blocked, report.audience) == (100, 40, 60)
    by_country = {line.region: line for line in report.countries}
    assert {r: (line.contacts, line.sent) for r, line in by_country.items()} == {
        "US": (40, 0),
        "CA": (30, 30),
        "JM": (10, 10),
        "DO": (10, 10),
        "BR": (10, 10),
    }
    assert by_country["US"].skipped == {US_NUMBER: 40}
    assert by_country["CA"].name == "Canada" and by_country["CA"].skipped == {}
    assert report.as_dict()["countries"][0] == {
        "region": "US",
        "name": "United States",
        "contacts": 40,
        "sent": 0,
        "skipped": {US_NUMBER: 40},
    }

    summary = campaign_start(campaign=campaign)
    assert (summary.recipients, summary.pending, summary.skipped) == (100, 60, 40)
    rows = dict(Message.objects.filter(campaign=campaign).values_list("to", "skip_reason"))
    assert {to for to, reason in rows.items() if reason == US_NUMBER} == set(phones["US"])
    assert {to for to, reason in rows.items() if reason == ""} == set(
        phones["CA"] + phones["CB"] + phones["BR"]
    )
    # The SQL rule and the Python one agree on every row.
    assert all((reason == US_NUMBER) == is_us_recipient(to) for to, reason in rows.items())


@pytest.mark.django_db
def test_contacts_known_only_by_a_user_id_are_placed_by_its_prefix() -> None:
    contact_list = make_contact_list()
    for user_id in ("US.1001", "US.ENT.1002", "CA.1003", "BR.1004"):
        contact = Contact.objects.create(user_id=user_id, name="U")
        contact_list.contacts.add(contact)
    campaign = marketing_campaign(contact_list)
    report = campaign_preflight(campaign=campaign)
    assert report.us_blocked == 2 and report.audience == 2
    assert {line.region: line.sent for line in report.countries} == {"US": 0, "CA": 1, "BR": 1}
    campaign_start(campaign=campaign)
    rows = dict(Message.objects.filter(campaign=campaign).values_list("to", "skip_reason"))
    assert rows == {"US.1001": US_USER_ID, "US.ENT.1002": US_USER_ID, "CA.1003": "", "BR.1004": ""}


@pytest.mark.django_db
def test_a_utility_template_reaches_every_north_american_number() -> None:
    contact_list, _ = north_american_and_brazilian_list()
    number = make_phone_number()
    template = make_template(account=number.account, category=TemplateCategory.UTILITY)
    campaign = make_campaign(phone_number=number, template=template, lists=[contact_list])
    assert campaign_preflight(campaign=campaign).us_blocked == 0
    assert campaign_start(campaign=campaign).pending == 100


@pytest.mark.django_db
def test_the_cost_estimate_leaves_out_the_rows_the_launch_skips() -> None:
    contact_list, _ = north_american_and_brazilian_list()
    make_contact(phone="+5511987650000", contact_list=contact_list, opted_out_at=OPTED_OUT_AT)
    campaign = marketing_campaign(contact_list)
    assert campaign_cost_estimate(campaign=campaign).messages == 60


COPY_CODE_COMPONENTS = [
    {"type": "BODY", "text": "Use code {{1}}"},
    {
        "type": "BUTTONS",
        "buttons": [{"type": "COPY_CODE", "example": "CARIBE25"}],
    },
]


def user_id_audience() -> ContactList:
    contact_list = make_contact_list()
    make_contact(phone="+5511987654300", name="Ana", contact_list=contact_list)
    for user_id in ("BR.2001", "BR.2002"):
        contact_list.contacts.add(Contact.objects.create(user_id=user_id, name="U"))
    make_contact(phone="+5511987654301", contact_list=contact_list, opted_out_at=OPTED_OUT_AT)
    return contact_list


@pytest.mark.django_db
def test_the_pre_flight_names_user_ids_meta_refuses_a_template_for() -> None:
    campaign = marketing_campaign(user_id_audience(), components=COPY_CODE_COMPONENTS)
    assert user_id_refusal(campaign.template) == "copy-code buttons"
    report = campaign_preflight(campaign=campaign)
    assert (report.user_id_refused, report.opted_out, report.audience) == (2, 1, 1)
    texts = [f.text for f in report.findings]
    assert (
        "2 contact(s) known only by a WhatsApp user id will be skipped: Meta does not send "
        "copy-code buttons to user ids (error 131062)."
    ) in texts


@pytest.mark.django_db
def test_user_ids_meta_refuses_a_template_for_are_skipped_before_any_send() -> None:
    number = make_phone_number()
    template = make_template(
        account=number.account,
        name="login_code",
        category=TemplateCategory.AUTHENTICATION,
        body_text="{{1}} is your code",
    )
    campaign = make_campaign(phone_number=number, template=template, lists=[user_id_audience()])
    assert campaign_preflight(campaign=campaign).user_id_refused == 2
    campaign_start(campaign=campaign)
    rows = dict(Message.objects.filter(campaign=campaign).values_list("to", "skip_reason"))
    assert rows == {
        "+5511987654300": "",
        "BR.2001": USER_ID_REFUSED,
        "BR.2002": USER_ID_REFUSED,
        "+5511987654301": OPTED_OUT,
    }


@pytest.mark.django_db
def test_authentication_templates_are_refused_for_user_ids_and_plain_ones_are_not() -> None:
    number = make_phone_number()
    auth = make_template(
        account=number.account, name="otp", category=TemplateCategory.AUTHENTICATION
    )
    plain = make_template(account=number.account, name="news")
    assert SkipRules.for_template(auth) == SkipRules(us_blocked=False, user_ids_refused=True)
    assert SkipRules.for_template(plain) == SkipRules(us_blocked=True, user_ids_refused=False)


def test_the_simulator_fails_marketing_to_us_users_as_meta_does() -> None:
    assert us_marketing_failure("+12122345678", "MARKETING") == 131049
    assert us_marketing_failure("12122345678", "marketing") == 131049
    assert us_marketing_failure("US.1349", "MARKETING") == 131049
    assert us_marketing_failure("+14165550100", "MARKETING") is None
    assert us_marketing_failure("+18765550100", "MARKETING") is None
    assert us_marketing_failure("+12122345678", "UTILITY") is None


@pytest.mark.django_db(transaction=True)
@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_through_the_simulator_every_non_us_number_is_sent_once_and_no_us_number() -> None:
    contact_list, phones = north_american_and_brazilian_list()
    # A username who wrote in: known only by a user id, sent with Meta's ``recipient``.
    for user_id in ("BR.77001", "US.77002"):
        contact_list.contacts.add(Contact.objects.create(user_id=user_id, name="U"))
    with running_simulator() as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        template = make_template(
            account=number.account, name="promo_na", category=TemplateCategory.MARKETING
        )
        sim.add_template(
            name=template.name,
            language=template.language,
            body_params=1,
            waba_id=number.account.waba_id,
            category=template.category,
        )
        campaign = make_campaign(
            phone_number=number,
            template=template,
            lists=[contact_list],
            param_mapping={"body": {"1": {"field": "name"}}},
        )
        campaign_start(campaign=campaign)
        work_burst()
        records = sim.records(bodies=True)
    bodies = [json.loads(r["body"]) for r in records if r.get("body")]
    sent_to = [body.get("to") or body["recipient"] for body in bodies]
    phones_sent = phones["CA"] + phones["CB"] + phones["BR"]
    expected = [*phones_sent, "BR.77001"]
    assert sorted(sent_to) == sorted(expected)  # each once
    assert [b for b in bodies if "recipient" in b] == [
        b for b in bodies if b.get("recipient") == "BR.77001" and "to" not in b
    ]
    assert {r["outcome"] for r in records} == {"accepted"}  # none the simulator fails (131049)
    statuses = set(Message.objects.filter(campaign=campaign).values_list("to", "status"))
    assert {to for to, status in statuses if status == "sent"} == {*phones_sent, "BR.77001"}
    assert {to for to, status in statuses if status == "skipped"} == {*phones["US"], "US.77002"}
