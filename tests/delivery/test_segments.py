"""Segments: every operator, field and engagement outcome over a real PostgreSQL, and every
kind of bad rule refused with its path, nothing saved, never a 500.

The five contacts: Ana and Bruno in Brazil, Carla in Toronto (+1 416: Canada, not the US),
Dan in New York, Eve known only by a Brazilian user id.
"""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from campaigns.models import Campaign, Contact, ContactList, Segment
from delivery.models import Message, MessageStatus
from delivery.segments.rules import MAX_RULES, RuleError, rules_parse
from delivery.segments.services import segment_match, segment_save
from tests.factories import (
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db


@pytest.fixture
def people() -> dict[str, Contact]:
    vip = make_contact_list(name="vip")
    staff = make_contact_list(name="staff")
    return {
        "ana": make_contact(
            phone="+5511999990001",
            name="Ana Souza",
            contact_list=vip,
            attributes={"city": "São Paulo", "age": "34", "plan": "gold", "joined": "2025-03-01"},
        ),
        "bruno": make_contact(
            phone="+5521999990002",
            name="Bruno",
            contact_list=staff,
            attributes={"city": "Rio", "age": 19, "joined": "2026-02-31"},  # not a real date
        ),
        "carla": make_contact(
            phone="+14165550123",
            name="Carla",
            attributes={"city": "Toronto", "age": "n/a", "joined": "2024-12-25"},
        ),
        "dan": make_contact(phone="+12125550123", name="Dan", attributes={}),
        "eve": Contact.objects.create(
            phone=None, user_id="BR.1349120865530274", name="Eve", attributes={"city": "são paulo"}
        ),
    }


def matched(rules: object, people: dict[str, Contact]) -> set[str]:
    ids = {c.pk: name for name, c in people.items()}
    match = segment_match(rules, sample=100)
    assert match.count == len(match.sample)
    return {ids[row["id"]] for row in match.sample}


TODAY = str(timezone.now().date())


def rule(field: str, op: str, value: Any) -> dict[str, Any]:
    return {"field": field, "op": op, "value": value}


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (rule("city", "eq", "São Paulo"), {"ana"}),
        # "not equal" includes those without the attribute, as a reader expects
        (rule("city", "ne", "São Paulo"), {"bruno", "carla", "dan", "eve"}),
        (rule("city", "in", ["Rio", "Toronto"]), {"bruno", "carla"}),
        (rule("city", "contains", "PAULO"), {"ana", "eve"}),  # any case
        (rule("name", "contains", "souza"), {"ana"}),
        (rule("phone", "starts_with", "+55"), {"ana", "bruno"}),
        (rule("city", "starts_with", "tor"), {"carla"}),
        (rule("city", "exists", True), {"ana", "bruno", "carla", "eve"}),
        (rule("city", "exists", False), {"dan"}),
        (rule("phone", "exists", False), {"eve"}),
        # a number stored as text or as a JSON number compares as a number; "n/a" never
        (rule("age", "gt", 20), {"ana"}),
        (rule("age", "gte", "19"), {"ana", "bruno"}),
        (rule("age", "lt", 20.5), {"bruno"}),
        (rule("age", "eq", 19), {"bruno"}),
        ({"not": rule("age", "gt", 20)}, {"bruno", "carla", "dan", "eve"}),
        # dates compare as dates; "2026-02-31" is no date and matches none (and no error)
        (rule("joined", "gte", "2025-01-01"), {"ana"}),
        (rule("joined", "lt", "2025-01-01"), {"carla"}),
        (rule("joined", "lte", "2026-12-31"), {"ana", "carla"}),
        # the country from the number: +1 416 is Canada, +1 212 the US; a user id by prefix
        (rule("country", "eq", "BR"), {"ana", "bruno", "eve"}),
        (rule("country", "eq", "CA"), {"carla"}),
        (rule("country", "eq", "us"), {"dan"}),
        (rule("country", "in", ["CA", "US"]), {"carla", "dan"}),
        (rule("country", "ne", "BR"), {"carla", "dan"}),
        ({"list": "vip"}, {"ana"}),
        ({"not": {"list": "staff"}}, {"ana", "carla", "dan", "eve"}),
        (
            rule("created", "gte", str(timezone.now().date())),
            {"ana", "bruno", "carla", "dan", "eve"},
        ),
        (rule("created", "lt", str(timezone.now().date())), set()),
        (
            {"all": [rule("country", "eq", "BR"), {"not": {"list": "staff"}}]},
            {"ana", "eve"},
        ),
        (
            {"any": [{"list": "vip"}, {"all": [rule("age", "lt", 30), rule("city", "eq", "Rio")]}]},
            {"ana", "bruno"},
        ),
    ],
)
def test_each_operator_and_field_matches_exactly(
    people: dict[str, Contact], rules: object, expected: set[str]
) -> None:
    assert matched(rules, people) == expected


def test_opted_in_is_a_date_and_can_be_required(people: dict[str, Contact]) -> None:
    Contact.objects.filter(pk=people["ana"].pk).update(opted_in_at="2026-03-04T10:00:00Z")
    assert matched(rule("opted_in", "exists", True), people) == {"ana"}
    assert matched(rule("opted_in", "eq", "2026-03-04"), people) == {"ana"}
    assert matched(rule("opted_in", "gt", "2026-03-04"), people) == set()


def _message(campaign: Campaign, contact: Contact, status: str, **fields: Any) -> Message:
    return Message.objects.create(
        campaign=campaign,
        contact=contact,
        phone_number=campaign.phone_number,
        template=campaign.template,
        to=contact.recipient,
        status=status,
        next_attempt_at=timezone.now(),
        **fields,
    )


@pytest.fixture
def sent_campaign(people: dict[str, Contact]) -> Campaign:
    campaign = make_campaign()
    now = timezone.now()
    _message(campaign, people["ana"], MessageStatus.DELIVERED, sent_at=now)
    _message(campaign, people["bruno"], MessageStatus.READ, sent_at=now - timedelta(hours=1))
    _message(campaign, people["carla"], MessageStatus.FAILED)
    _message(campaign, people["dan"], MessageStatus.SKIPPED, skip_reason="US number")
    # Eve got nothing from this campaign.
    InboundMessage.objects.create(
        wamid="wamid.reply-ana",
        from_phone=people["ana"].phone,
        type="text",
        text="Yes please",
        sent_at=now,
        phone_number=campaign.phone_number,
        campaign=campaign,
        payload={},
    )
    Contact.objects.filter(pk=people["bruno"].pk).update(opted_out_at=now)
    return campaign


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        ("not_sent", {"dan"}),
        ("sent", {"ana", "bruno"}),
        ("failed", {"carla"}),
        ("delivered", {"ana", "bruno"}),  # read was delivered first
        ("delivered_not_read", {"ana"}),
        ("read", {"bruno"}),
        ("replied", {"ana"}),
        ("opted_out", {"bruno"}),
    ],
)
def test_each_engagement_outcome_of_a_campaign(
    people: dict[str, Contact], sent_campaign: Campaign, outcome: str, expected: set[str]
) -> None:
    rules = {"campaign": sent_campaign.pk, "outcome": outcome}
    assert matched(rules, people) == expected
    # and its opposite is everyone else, those the campaign never reached included
    assert matched({"not": rules}, people) == set(people) - expected


def test_recent_marketing_counts_only_marketing_templates_sent_in_the_window(
    people: dict[str, Contact],
) -> None:
    number = make_phone_number()
    marketing = make_campaign(
        phone_number=number,
        template=make_template(account=number.account, name="offer", category="MARKETING"),
    )
    utility = make_campaign(
        phone_number=number,
        template=make_template(account=number.account, name="receipt", category="UTILITY"),
    )
    now = timezone.now()
    _message(marketing, people["ana"], MessageStatus.DELIVERED, sent_at=now - timedelta(days=2))
    _message(marketing, people["bruno"], MessageStatus.SENT, sent_at=now - timedelta(days=9))
    _message(marketing, people["carla"], MessageStatus.PENDING)  # not sent yet
    _message(utility, people["dan"], MessageStatus.DELIVERED, sent_at=now)

    assert matched({"marketing_within_days": 7}, people) == {"ana"}
    assert matched({"marketing_within_days": 10}, people) == {"ana", "bruno"}
    assert matched({"marketing_within_days": 1}, people) == set()


def test_a_hostile_attribute_name_or_value_is_only_data(people: dict[str, Contact]) -> None:
    hostile = "x') OR 1=1; DROP TABLE campaigns_contact; --"
    people["carla"].attributes[hostile] = hostile
    people["carla"].save()

    assert matched(rule(hostile, "eq", hostile), people) == {"carla"}
    assert matched(rule("city", "eq", hostile), people) == set()
    assert matched(rule("city", "contains", "%"), people) == set()  # no LIKE wildcard
    assert Contact.objects.count() == 5


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ("{not json", "rules: is not JSON: Expecting property name"),
        ([], "rules: a rule is a JSON object, not a list"),
        ({"all": []}, "rules.all: takes a non-empty list of rules"),
        ({"all": [rule("city", "bigger", 3)]}, "rules.all[0].op: 'bigger' does not apply"),
        ({"all": [{"field": "city", "op": "eq"}]}, "rules.all[0].value: is missing"),
        (rule("country", "contains", "B"), "rules.op: 'contains' does not apply to 'country'"),
        (rule("country", "eq", "Brazil"), "rules.value: is a two-letter country code"),
        (rule("age", "gt", "lots"), "rules.value: 'lots' cannot compare: give a number or a date"),
        (rule("joined", "gt", "2026-02-31"), "rules.value: '2026-02-31' is not a date"),
        (rule("created", "gt", "yesterday"), "rules.value: 'yesterday' is not a date"),
        (rule("city", "exists", "yes"), "rules.value: is true (has a value) or false"),
        (rule("city", "in", "Rio"), "rules.value: is a non-empty list of values for 'in'"),
        (rule("city", "eq", {"a": 1}), "rules.value: is text or a number, not an object"),
        ({"not": {"list": "nobody"}}, "rules.not.list: no contact list is named 'nobody'"),
        ({"campaign": 999999, "outcome": "read"}, "rules.campaign: no campaign has the id"),
        ({"campaign": 1, "outcome": "bounced"}, "rules.outcome: is one of not_sent"),
        ({"marketing_within_days": 0}, "rules.marketing_within_days: is a whole number"),
        ({"list": "vip", "field": "x"}, "rules: unexpected"),
        ({"when": "now"}, "rules: is a group (all, any, not) or a rule"),
    ],
)
def test_a_bad_rule_is_refused_naming_it_and_nothing_is_saved(
    people: dict[str, Contact], rules: object, message: str
) -> None:
    text = rules if isinstance(rules, str) else json.dumps(rules)
    with pytest.raises(RuleError) as refused:
        segment_save(name="bad", rules=text)
    assert str(refused.value).startswith(message), str(refused.value)
    assert not Segment.objects.exists()


def test_every_bad_rule_of_a_segment_is_named_at_once(people: dict[str, Contact]) -> None:
    rules = {
        "all": [
            rule("age", "gt", "lots"),
            {"list": "vip"},
            {"any": [{"list": "nobody"}, rule("city", "in", "Rio")]},
            {"not": {"when": "now"}},
        ]
    }
    with pytest.raises(RuleError) as refused:
        segment_save(name="bad", rules=rules)
    assert set(refused.value.problems) == {
        "rules.all[0].value",
        "rules.all[2].any[1].value",
        "rules.all[3].not",
    }
    assert refused.value.path == "rules.all[0].value"  # the first, as written

    # Well-formed, but naming two lists and a campaign that do not exist: all three named.
    rules = {
        "all": [
            {"list": "gone"},
            {"list": "vip"},
            {"not": {"list": "also gone"}},
            {"campaign": 999999, "outcome": "read"},
        ]
    }
    with pytest.raises(RuleError) as refused:
        segment_save(name="bad", rules=rules)
    assert refused.value.problems == {
        "rules.all[0].list": "no contact list is named 'gone'",
        "rules.all[2].not.list": "no contact list is named 'also gone'",
        "rules.all[3].campaign": "no campaign has the id 999999",
    }
    assert not Segment.objects.exists()


def test_past_the_most_rules_reading_stops_with_one_error() -> None:
    rules = {"any": [{"list": "x"} for _ in range(MAX_RULES + 5)]}
    with pytest.raises(RuleError) as refused:
        rules_parse(rules)
    assert list(refused.value.problems.values()) == [f"more than {MAX_RULES} rules in one segment"]


def test_a_segment_naming_a_list_deleted_since_says_so_when_counted(
    people: dict[str, Contact],
) -> None:
    segment_save(name="vips", rules={"list": "vip"})
    ContactList.objects.filter(name="vip").delete()
    with pytest.raises(CommandError, match="segment 'vips': rules.list: no contact list is named"):
        call_command("segment", "count", "vips")


def test_the_cli_creates_counts_and_lists_segments(people: dict[str, Contact]) -> None:
    out = StringIO()
    rules = json.dumps({"all": [rule("country", "eq", "BR"), {"not": {"list": "staff"}}]})
    call_command("segment", "create", "--name", "br-not-staff", "--rules", rules, stdout=out)
    segment = Segment.objects.get(name="br-not-staff")
    assert out.getvalue().strip() == str(segment.pk)

    out = StringIO()
    call_command("segment", "count", "br-not-staff", stdout=out)
    assert out.getvalue().strip() == "2"
    out = StringIO()
    call_command("segment", "count", "br-not-staff", "--json", stdout=out)
    reported = json.loads(out.getvalue())
    assert reported["count"] == 2
    assert {row["name"] for row in reported["sample"]} == {"Ana Souza", "Eve"}

    with pytest.raises(CommandError, match=r"rules.all\[0\].op: 'near' does not apply"):
        call_command(
            "segment",
            "create",
            "--name",
            "x",
            "--rules",
            json.dumps({"all": [rule("a", "near", 1)]}),
        )
    with pytest.raises(CommandError, match="no segment is named 'nope'"):
        call_command("segment", "count", "nope")
    out = StringIO()
    call_command("segment", "list", stdout=out)
    assert "br-not-staff" in out.getvalue() and "\tx\t" not in out.getvalue()
