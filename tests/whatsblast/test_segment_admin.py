"""The segment admin and the contacts list's segment filter and CSV export, as Marketing and
Support use them, over a real PostgreSQL.

The people: Ana (São Paulo, VIP, spent 150), Bruno (São Paulo, staff, spent 300), Carla
(Toronto, spent 50), Dan (São Paulo, a name and a note that a spreadsheet would run as
formulas, spent 100) and Eve (São Paulo, known only by a Brazilian user id, spent nothing).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from campaigns.models import CampaignStatus, Contact, ContactList, ListMembership, Segment
from delivery.models import Message
from delivery.segments.admin_support import (
    attribute_keys,
    contacts_in_segment,
    positional_sql,
    segment_preview,
)
from delivery.segments.services import segment_compile, segment_save
from tests.factories import make_campaign, make_contact, make_contact_list, make_message
from tests.ui.support import PASSWORD, role_user
from whatsblast.admin.customer_links import customer_url
from whatsblast.auth.roles import MARKETING, SUPPORT

pytestmark = pytest.mark.django_db

SAO_PAULO = {"field": "city", "op": "eq", "value": "São Paulo"}
NOT_STAFF = {"not": {"list": "staff"}}
SPENT_100 = {"field": "total_spent", "op": "gte", "value": 100}
THREE_RULES = {"all": [SAO_PAULO, NOT_STAFF, SPENT_100]}
EVIL_NAME = '=HYPERLINK("http://evil.example","click")'

COUNT_URL = "/admin/campaigns/segment/count/"
ADD_URL = "/admin/campaigns/segment/add/"
CONTACTS_URL = "/admin/campaigns/contact/"
EXPORT_URL = "/admin/campaigns/contact/export.csv"


@dataclass
class People:
    vip: ContactList
    staff: ContactList
    ana: Contact
    bruno: Contact
    carla: Contact
    dan: Contact
    eve: Contact


@pytest.fixture
def people() -> People:
    vip = make_contact_list(name="vip")
    staff = make_contact_list(name="staff")
    return People(
        vip=vip,
        staff=staff,
        ana=make_contact(
            phone="+5511999990001",
            name="Ana Souza",
            contact_list=vip,
            attributes={"city": "São Paulo", "total_spent": "150"},
        ),
        bruno=make_contact(
            phone="+5521999990002",
            name="Bruno",
            contact_list=staff,
            attributes={"city": "São Paulo", "total_spent": 300},
        ),
        carla=make_contact(
            phone="+14165550123",
            name="Carla",
            attributes={"city": "Toronto", "total_spent": "50"},
        ),
        dan=make_contact(
            phone="+12125550123",
            name=EVIL_NAME,
            attributes={"city": "São Paulo", "note": "@SUM(A1:A9)", "total_spent": "100"},
        ),
        eve=Contact.objects.create(
            phone=None, user_id="BR.1349120865530274", name="Eve", attributes={"city": "São Paulo"}
        ),
    )


def logged_in(role: str) -> Client:
    client = Client()
    client.force_login(role_user(role))
    return client


def count(client: Client, rules: object) -> Any:
    text = rules if isinstance(rules, str) else json.dumps(rules)
    return client.post(COUNT_URL, {"rules": text})


# --- the live count -------------------------------------------------------------------------


def test_the_count_answers_how_many_match_and_a_sample_linking_each_customer(
    people: People,
) -> None:
    response = count(logged_in(MARKETING), THREE_RULES)

    assert response.status_code == 200
    data = response.json()
    assert data["count"] == 2 and data["count_text"] == "2 contacts"
    assert [row["id"] for row in data["sample"]] == [people.ana.pk, people.dan.pk]
    ana = data["sample"][0]
    assert ana["key"] == "+5511999990001" and ana["name"] == "Ana Souza"
    assert ana["customer_url"] == customer_url("+5511999990001")
    assert ana["contact_url"] == reverse("admin:campaigns_contact_change", args=[people.ana.pk])

    # A contact known only by its user id is linked by it.
    everyone_there = count(logged_in(SUPPORT), SAO_PAULO).json()
    assert everyone_there["count"] == 4
    eve = next(row for row in everyone_there["sample"] if row["id"] == people.eve.pk)
    assert eve["key"] == "BR.1349120865530274"
    assert eve["customer_url"] == customer_url("BR.1349120865530274")


def test_the_sample_is_ten_contacts_of_the_whole_count() -> None:
    for i in range(12):
        make_contact(phone=f"+55119888800{i:02d}", attributes={"plan": "gold"})
    data = count(logged_in(MARKETING), {"field": "plan", "op": "eq", "value": "gold"}).json()
    assert data["count"] == 12 and len(data["sample"]) == 10


@pytest.mark.parametrize(
    ("rules", "path", "words"),
    [
        (
            {"all": [SAO_PAULO, {"field": "city", "op": "bigger", "value": 1}]},
            "rules.all[1].op",
            "'bigger' does not apply to 'city'",
        ),
        ({"all": [SAO_PAULO, {"not": {"list": "nobody"}}]}, "rules.all[1].not.list", "nobody"),
        ({"any": [{"campaign": 999999, "outcome": "read"}]}, "rules.any[0].campaign", "999999"),
        ({"all": []}, "rules.all", "non-empty list"),
        ({"marketing_within_days": 0}, "rules.marketing_within_days", "1 to 3660"),
        ('{"all": [', "rules", "is not JSON"),
        ("", "rules", "is not JSON"),
        ("null", "rules", "not null"),
    ],
)
def test_a_bad_rule_or_bad_json_is_a_400_naming_the_rules_path(
    people: People, rules: object, path: str, words: str
) -> None:
    response = count(logged_in(MARKETING), rules)

    assert response.status_code == 400
    data = response.json()
    assert data["path"] == path
    assert data["error"].startswith(f"{path}: ") and words in data["error"]


def test_a_huge_campaign_id_is_an_error_not_a_500(people: People) -> None:
    response = count(logged_in(MARKETING), {"campaign": 10**30, "outcome": "read"})
    assert response.status_code == 400
    assert response.json()["path"] == "rules.campaign"


def test_the_count_is_refused_without_view_segment_by_get_and_without_a_csrf_token(
    people: People,
) -> None:
    clerk = get_user_model().objects.create_user("clerk", password=PASSWORD, is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_contact"))
    client = Client()
    client.force_login(clerk)
    refused = count(client, SAO_PAULO)
    assert refused.status_code == 403 and "error" in refused.json()

    marketer = logged_in(MARKETING)
    assert marketer.get(COUNT_URL).status_code == 405

    anonymous = Client().post(COUNT_URL, {"rules": json.dumps(SAO_PAULO)})
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(get_user_model().objects.get(username="mia"))
    assert count(strict, SAO_PAULO).status_code == 403


def test_a_slow_count_is_stopped_and_said_so(people: People, monkeypatch: Any) -> None:
    from django.db import connection

    from delivery.segments import admin_support

    def slow_match(rules: object, *, sample: int = 0) -> Any:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(2)")
        raise AssertionError("the timeout should have stopped the statement")

    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        (before,) = cursor.fetchone()
    monkeypatch.setattr(admin_support, "segment_match", slow_match)
    with pytest.raises(admin_support.SegmentTooSlow, match="longer than"):
        segment_preview(SAO_PAULO, timeout_ms=50)
    monkeypatch.setattr(admin_support, "COUNT_TIMEOUT_MS", 50)
    response = count(logged_in(MARKETING), SAO_PAULO)
    assert response.status_code == 400 and "longer than" in response.json()["error"]
    # The connection's own timeout is left as it was.
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == before


# --- saving ---------------------------------------------------------------------------------


def test_marketing_saves_a_segment_and_a_bad_rule_is_shown_on_the_form(people: People) -> None:
    marketer = logged_in(MARKETING)
    bad = marketer.post(
        ADD_URL,
        {"name": "Big spenders", "description": "", "rules": json.dumps({"all": [NOT_STAFF, {}]})},
    )
    assert bad.status_code == 200
    page = bad.content.decode()
    assert "rules.all[1]: is a group (all, any, not)" in page
    assert not Segment.objects.exists()

    malformed = marketer.post(ADD_URL, {"name": "Big spenders", "rules": '{"all": ['})
    assert "rules: is not JSON" in malformed.content.decode()
    # What was typed comes back as it was, to be fixed.
    assert "{&quot;all&quot;: [" in malformed.content.decode()

    unknown_list = marketer.post(
        ADD_URL, {"name": "Big spenders", "rules": json.dumps({"list": "nobody"})}
    )
    assert (
        "rules.list: no contact list is named &#x27;nobody&#x27;" in unknown_list.content.decode()
    )
    assert not Segment.objects.exists()

    saved = marketer.post(
        ADD_URL, {"name": "Big spenders", "description": "SP", "rules": json.dumps(THREE_RULES)}
    )
    assert saved.status_code == 302
    segment = Segment.objects.get(name="Big spenders")
    assert segment.rules == THREE_RULES and segment.description == "SP"


def test_the_change_page_carries_the_builder_its_choices_and_the_rules(people: People) -> None:
    campaign = make_campaign(name="Spring sale")
    segment = Segment.objects.create(name="SP", rules=THREE_RULES)
    response = logged_in(MARKETING).get(
        reverse("admin:campaigns_segment_change", args=[segment.pk])
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="wb-segment"' in page and "segment_builder.js" in page
    assert f'data-count-url="{COUNT_URL}"' in page
    assert 'name="rules"' in page and "São Paulo" in page
    options = response.context["builder_options"]
    assert {"city", "total_spent", "note"} <= set(options["attributes"])
    assert options["lists"] == ["staff", "vip"]
    assert options["campaigns"][0] == {"id": campaign.pk, "name": "Spring sale", "status": "draft"}
    assert [f["name"] for f in options["contact_fields"]] == [
        "phone",
        "name",
        "country",
        "created",
        "opted_in",
    ]
    assert f"{CONTACTS_URL}?segment={segment.pk}" in page


def test_support_reads_a_segment_and_counts_it_but_cannot_change_it(people: People) -> None:
    segment = Segment.objects.create(name="SP", rules=THREE_RULES)
    support = logged_in(SUPPORT)
    listing = support.get("/admin/campaigns/segment/")
    assert listing.status_code == 200 and "Count on its page" in listing.content.decode()
    page = support.get(reverse("admin:campaigns_segment_change", args=[segment.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert '<textarea id="id_rules"' in html and "readonly" in html
    assert 'name="_save"' not in html
    assert count(support, THREE_RULES).json()["count"] == 2
    assert support.get(ADD_URL).status_code == 403
    refused = support.post(
        reverse("admin:campaigns_segment_change", args=[segment.pk]),
        {"name": "SP", "rules": json.dumps(SAO_PAULO)},
    )
    assert refused.status_code == 403
    assert Segment.objects.get(pk=segment.pk).rules == THREE_RULES


def test_marketing_lists_changes_and_deletes_segments(people: People) -> None:
    segment = Segment.objects.create(name="SP", description="São Paulo " * 20, rules=SAO_PAULO)
    marketer = logged_in(MARKETING)
    listing = marketer.get("/admin/campaigns/segment/").content.decode()
    assert "SP" in listing and "Count on its page" in listing
    assert f"/admin/campaigns/segment/{segment.pk}/change/#wb-count" in listing
    assert "São Paulo " * 20 not in listing  # the description is cut short

    changed = marketer.post(
        reverse("admin:campaigns_segment_change", args=[segment.pk]),
        {"name": "SP, not staff", "description": "", "rules": json.dumps(THREE_RULES)},
    )
    assert changed.status_code == 302
    segment.refresh_from_db()
    assert (segment.name, segment.rules) == ("SP, not staff", THREE_RULES)

    deleted = marketer.post(
        reverse("admin:campaigns_segment_delete", args=[segment.pk]), {"post": "yes"}
    )
    assert deleted.status_code == 302 and not Segment.objects.exists()


def test_the_segment_list_costs_a_fixed_number_of_queries(
    django_assert_max_num_queries: Any,
) -> None:
    Segment.objects.bulk_create(
        Segment(name=f"segment {i}", rules={"list": f"list {i}"}) for i in range(2_000)
    )
    marketer = logged_in(MARKETING)
    marketer.get("/admin/campaigns/segment/")
    with django_assert_max_num_queries(12):
        assert marketer.get("/admin/campaigns/segment/").status_code == 200


def test_the_roles_hold_the_segment_permissions() -> None:
    marketing = role_user(MARKETING)
    support = role_user(SUPPORT)
    for action in ("view", "add", "change", "delete"):
        assert marketing.has_perm(f"campaigns.{action}_segment")
    assert support.has_perm("campaigns.view_segment")
    assert not support.has_perm("campaigns.change_segment")


# --- the contacts list ----------------------------------------------------------------------


def shown(response: Any) -> set[int]:
    return {c.pk for c in response.context["cl"].queryset}


def test_the_segment_filter_shows_exactly_the_contacts_the_segment_matches_now(
    people: People,
) -> None:
    segment = Segment.objects.create(name="SP big spenders", rules=THREE_RULES)
    marketer = logged_in(MARKETING)

    response = marketer.get(CONTACTS_URL, {"segment": segment.pk})

    assert response.status_code == 200
    assert shown(response) == {people.ana.pk, people.dan.pk}
    assert "SP big spenders" in response.content.decode()  # offered in the filter
    # With the list's other filters and its search.
    assert shown(marketer.get(CONTACTS_URL, {"segment": segment.pk, "q": "Souza"})) == {
        people.ana.pk
    }
    assert shown(
        marketer.get(CONTACTS_URL, {"segment": segment.pk, "lists__id__exact": people.vip.pk})
    ) == {people.ana.pk}
    # The same contacts as the segment's own count.
    assert segment_preview(THREE_RULES, sample=10).count == 2


def test_the_segment_filter_binds_every_value(people: People) -> None:
    hostile = {"field": "x') OR 1=1 --", "op": "eq", "value": "'; DROP TABLE campaigns_contact; --"}
    Contact.objects.filter(pk=people.carla.pk).update(
        attributes={hostile["field"]: hostile["value"]}
    )
    compiled = segment_compile(hostile)
    sql, params = positional_sql(compiled.condition, compiled.params)
    assert "DROP" not in sql and "%(" not in sql and params == [hostile["field"], hostile["value"]]
    matched = contacts_in_segment(Contact.objects.all(), hostile)
    assert [c.pk for c in matched] == [people.carla.pk]


def test_a_segment_that_cannot_be_used_now_says_why_and_shows_nobody(people: People) -> None:
    segment = Segment.objects.create(name="Not staff", rules={"all": [SAO_PAULO, NOT_STAFF]})
    people.staff.delete()
    marketer = logged_in(MARKETING)

    response = marketer.get(CONTACTS_URL, {"segment": segment.pk})

    assert response.status_code == 200
    assert shown(response) == set()
    assert "no contact list is named &#x27;staff&#x27;" in response.content.decode()
    for value in ("999999", "abc"):
        assert marketer.get(CONTACTS_URL, {"segment": value}).status_code == 200


def test_show_counts_does_not_run_every_segment(people: People) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    Segment.objects.create(name="Everyone in SP", rules=SAO_PAULO)
    Segment.objects.create(name="Broken", rules={"list": "staff"})
    people.staff.delete()  # a segment that cannot run now: no error either
    with CaptureQueriesContext(connection) as queries:
        response = logged_in(MARKETING).get(CONTACTS_URL, {"_facets": "True"})
    page = response.content.decode()
    assert response.status_code == 200 and "Broken (-)" in page and "Everyone in SP (-)" in page
    assert "cannot be used now" not in page
    assert not [q for q in queries.captured_queries if "campaigns_contact AS c" in q["sql"]]


def test_without_view_segment_the_filter_is_not_offered(people: People) -> None:
    Segment.objects.create(name="Secret plan", rules=SAO_PAULO)
    clerk = get_user_model().objects.create_user("clerk", password=PASSWORD, is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_contact"))
    client = Client()
    client.force_login(clerk)
    page = client.get(CONTACTS_URL).content.decode()
    assert "Secret plan" not in page and "By segment" not in page


def rows_of(response: Any) -> list[list[str]]:
    assert response.streaming
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="contacts-')
    text = b"".join(response.streaming_content).decode()
    return list(csv.reader(io.StringIO(text)))


def test_the_csv_export_is_the_filtered_list_with_attributes_as_columns_made_safe(
    people: People,
) -> None:
    segment = Segment.objects.create(name="SP", rules=SAO_PAULO)
    Contact.objects.filter(pk=people.dan.pk).update(opted_out_at=timezone.now())
    marketer = logged_in(MARKETING)
    listing = marketer.get(CONTACTS_URL, {"segment": segment.pk}).content.decode()
    assert f'href="{EXPORT_URL}?segment={segment.pk}"' in listing

    rows = rows_of(marketer.get(EXPORT_URL, {"segment": segment.pk}))

    header = rows[0]
    assert header == [
        "phone",
        "user_id",
        "name",
        "opted_in_at",
        "opted_out_at",
        "city",
        "note",
        "total_spent",
    ]
    by_name = {row[2]: dict(zip(header, row, strict=True)) for row in rows[1:]}
    # The list's own order: by phone, then user id (Eve has none).
    assert [row[2] for row in rows[1:]] == [f"'{EVIL_NAME}", "Ana Souza", "Bruno", "Eve"]
    dan = by_name[f"'{EVIL_NAME}"]
    assert dan["phone"] == "+12125550123"  # a phone stays a phone
    assert dan["note"] == "'@SUM(A1:A9)" and dan["opted_out_at"].startswith("20")
    assert by_name["Bruno"]["total_spent"] == "300" and by_name["Ana Souza"]["total_spent"] == "150"
    eve = by_name["Eve"]
    assert (eve["phone"], eve["user_id"], eve["total_spent"]) == ("", "BR.1349120865530274", "")

    # Searched, the export follows the search.
    searched = rows_of(marketer.get(EXPORT_URL, {"q": "Carla"}))
    assert [row[2] for row in searched[1:]] == ["Carla"]


def test_an_attribute_named_like_a_column_and_a_formula_key_stay_apart_and_safe() -> None:
    make_contact(phone="+5511999990009", name="Zé", attributes={"name": "José", "=cmd": "1"})
    rows = rows_of(logged_in(SUPPORT).get(EXPORT_URL))
    assert rows[0][5:] == ["'=cmd", "attributes.name"]
    assert rows[1][2] == "Zé" and rows[1][5:] == ["1", "José"]


def test_the_export_action_downloads_the_selected_contacts(people: People) -> None:
    response = logged_in(MARKETING).post(
        CONTACTS_URL,
        {"action": "export_selected", "_selected_action": [people.carla.pk, people.ana.pk]},
    )
    assert [row[2] for row in rows_of(response)[1:]] == ["Carla", "Ana Souza"]


def test_the_export_streams_from_a_chunked_cursor(people: People) -> None:
    from delivery.segments import admin_support

    rows = admin_support.contacts_csv_rows(Contact.objects.order_by("pk"))
    assert next(rows)[:3] == ["phone", "user_id", "name"]
    assert next(rows)[2] == "Ana Souza"  # the first row before the others are read


def test_the_export_is_refused_without_view_contact() -> None:
    nobody = get_user_model().objects.create_user("nobody", password=PASSWORD, is_staff=True)
    client = Client()
    client.force_login(nobody)
    assert client.get(EXPORT_URL).status_code == 403


# --- a contact's page -----------------------------------------------------------------------


def test_a_contacts_page_shows_its_lists_and_latest_messages_and_links_the_customer_page(
    people: People,
) -> None:
    campaign = make_campaign(name="Spring sale", status="completed")
    now = timezone.now()
    first = make_message(
        campaign=campaign, to=people.ana.phone, contact=people.ana, status="read",
        sent_at=now, delivered_at=now, read_at=now,
    )  # fmt: skip
    make_message(campaign=campaign, to=people.carla.phone, contact=people.carla, status="sent")
    ListMembership.objects.create(contact_list=people.staff, contact=people.ana)

    response = logged_in(MARKETING).get(
        reverse("admin:campaigns_contact_change", args=[people.ana.pk])
    )

    assert response.status_code == 200
    page = response.content.decode()
    lists = page[page.index('id="contact-lists"') : page.index('id="contact-history"')]
    assert "staff" in lists and "vip" in lists
    assert reverse("admin:campaigns_contactlist_change", args=[people.vip.pk]) in lists
    history = page[page.index('id="contact-history"') :]
    assert f'data-message="{first.pk}"' in history
    assert "Spring sale" in history and campaign.template.name in history and "Read" in history
    assert Message.objects.filter(contact=people.carla).exists()
    assert history.count("data-message=") == 1  # nobody else's
    assert f'href="{customer_url(people.ana.phone or "")}"' in page


def test_a_contacts_page_shows_the_newest_fifty_of_many(people: People) -> None:
    campaign = make_campaign(status="completed")
    Message.objects.bulk_create(
        Message(
            campaign=campaign,
            phone_number=campaign.phone_number,
            template=campaign.template,
            to=f"+55119000000{i:02d}",  # one message per recipient of a campaign
            contact=people.ana,
            status="delivered",
            next_attempt_at=timezone.now(),
        )
        for i in range(55)
    )
    response = logged_in(SUPPORT).get(
        reverse("admin:campaigns_contact_change", args=[people.ana.pk])
    )
    page = response.content.decode()
    assert page.count("data-message=") == 50
    assert "Messages to them (55)" in page and "The newest 50 of 55" in page


def test_attribute_keys_come_from_the_newest_contacts() -> None:
    make_contact(attributes={"old_key": "x"})
    make_contact(attributes={"b": "1", "a": "2"})
    Contact.objects.create(phone="+5511999990077", attributes=["not", "an", "object"])
    assert attribute_keys(sample=1) == ["a", "b"]  # the array is not a contact's fields
    assert attribute_keys() == ["a", "b", "old_key"]


def test_a_segment_a_draft_uses_cannot_be_deleted_one_a_sent_campaign_used_can() -> None:
    used = segment_save(name="used", rules={"field": "city", "op": "eq", "value": "Rio"})
    left_out = segment_save(name="left out", rules={"marketing_within_days": 7})
    old = segment_save(name="old", rules={"field": "city", "op": "eq", "value": "Natal"})
    draft = make_campaign(name="Spring")
    draft.segments.set([used])
    draft.exclude_segments.set([left_out])
    sent = make_campaign(name="Winter", status=CampaignStatus.COMPLETED)
    sent.segments.set([old])
    mia = logged_in(MARKETING)
    for segment, verb in ((used, "sends to"), (left_out, "leaves out")):
        url = reverse("admin:campaigns_segment_delete", args=[segment.pk])
        page = mia.get(url).content.decode()
        assert f"Campaign “Spring” (draft) {verb} “{segment.name}”" in page
        mia.post(url, {"post": "yes"})
        assert Segment.objects.filter(pk=segment.pk).exists()
    mia.post(reverse("admin:campaigns_segment_delete", args=[old.pk]), {"post": "yes"})
    assert not Segment.objects.filter(pk=old.pk).exists()
