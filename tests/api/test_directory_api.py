"""/api/v1/lists, /segments and /templates: creating lists and segments (once per
Idempotency-Key), reading them a page at a time, counting a segment, reading templates.

Every response is checked against the OpenAPI description, and each operation's documented
statuses are all provoked.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone

from campaigns.models import ContactList, HeaderFormat, Segment, TemplateStatus
from delivery.api.keys import api_key_create
from tests.api.support import DOCUMENT
from tests.api.test_contacts_api import UNKNOWN_KEY, Caller, documented, issued, limited
from tests.factories import (
    make_account,
    make_campaign,
    make_contact,
    make_contact_list,
    make_template,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> Caller:
    return Caller(issued("contacts"))


@pytest.fixture
def send_only(number: Any) -> str:
    _, raw = api_key_create(name="s", phone_number_ids=[number.phone_number_id])
    return raw


# --- lists ------------------------------------------------------------------------------------


def test_a_list_is_created_once_per_idempotency_key_and_names_are_unique(api: Caller) -> None:
    body = {"name": " Newsletter ", "description": "Monthly"}
    response, created = api("POST", "/lists", body, **{"Idempotency-Key": "l-1"})
    assert response.status_code == 201
    assert created["name"] == "Newsletter" and created["members"] == 0
    response, again = api("POST", "/lists", body, **{"Idempotency-Key": "l-1"})
    assert response.status_code == 200 and response["Idempotent-Replayed"] == "true"
    assert again == created
    assert ContactList.objects.count() == 1
    response, taken = api("POST", "/lists", {"name": "Newsletter"})
    assert (response.status_code, taken["error"]["code"]) == (409, "list_name_taken")
    response, bad = api("POST", "/lists", {"name": "   ", "colour": "red"})
    assert response.status_code == 400
    assert set(bad["error"]["fields"]) == {"name", "colour"}
    assert ContactList.objects.count() == 1


@pytest.mark.parametrize(
    "name", ["\x1c", "\ufeff", " \u3000\x85", "\u2009", "a\x1c", "\ufeffVIP", "Sales"]
)
def test_a_name_is_blank_to_the_api_exactly_when_the_document_says_so(
    api: Caller, name: str
) -> None:
    pattern = DOCUMENT["components"]["schemas"]["ListRequest"]["properties"]["name"]["pattern"]
    documented_ok = re.search(pattern, name) is not None
    response, body = api("POST", "/lists", {"name": name})
    assert (response.status_code == 201) == documented_ok, body
    if documented_ok:
        assert body["name"] == name.strip("\ufeff\x1c")


def test_lists_are_paged_with_their_member_counts(api: Caller) -> None:
    lists = [make_contact_list(name=f"l{n}") for n in range(5)]
    for n, contact_list in enumerate(lists):
        for _ in range(n):
            make_contact(contact_list=contact_list)
    seen: dict[str, int] = {}
    cursor = None
    while True:
        query: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        response, page = api("GET", "/lists", query=query)
        assert response.status_code == 200
        for row in page["data"]:
            assert row["name"] not in seen
            seen[row["name"]] = row["members"]
        if len(seen) == 2:
            make_contact_list(name="late")  # arrives between pages, after the cursor
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == {"l0": 0, "l1": 1, "l2": 2, "l3": 3, "l4": 4, "late": 0}


# --- segments ---------------------------------------------------------------------------------


def test_a_segment_is_saved_counted_and_listed(api: Caller) -> None:
    vip = make_contact_list(name="vip")
    for city in ("Recife", "Recife", "Natal"):
        make_contact(contact_list=vip, attributes={"city": city})
    rules = {"all": [{"list": "vip"}, {"field": "city", "op": "eq", "value": "Recife"}]}
    response, segment = api(
        "POST", "/segments", {"name": "recife-vip", "rules": rules}, **{"Idempotency-Key": "s"}
    )
    assert response.status_code == 201 and segment["rules"] == rules
    response, again = api(
        "POST", "/segments", {"name": "recife-vip", "rules": rules}, **{"Idempotency-Key": "s"}
    )
    assert response.status_code == 200 and again == segment
    path = f"/segments/{segment['id']}/count"
    response, count = api("GET", path, documented="/segments/{id}/count")
    assert response.status_code == 200
    assert count == {"id": segment["id"], "name": "recife-vip", "count": 2}
    response, page = api("GET", "/segments")
    assert [row["name"] for row in page["data"]] == ["recife-vip"]
    response, taken = api("POST", "/segments", {"name": "recife-vip", "rules": {"list": "vip"}})
    assert (response.status_code, taken["error"]["code"]) == (409, "segment_name_taken")
    assert Segment.objects.get().rules == rules  # not replaced


def test_rules_that_cannot_be_used_are_a_422_naming_the_rule(api: Caller) -> None:
    for rules, path in (
        ({"all": [{"field": "city", "op": "bigger", "value": 1}]}, "rules.all[0].op"),
        ({"any": [{"list": "vip"}, {"list": "nowhere"}]}, "rules.any[0].list"),
        ({"campaign": 999999, "outcome": "read"}, "rules.campaign"),
    ):
        response, body = api("POST", "/segments", {"name": "s", "rules": rules})
        assert (response.status_code, body["error"]["code"]) == (422, "invalid_segment_rules")
        assert path in body["error"]["fields"], body
    rules = {"all": [{"field": "city", "op": "bigger", "value": 1}, {"not": {"when": 1}}]}
    response, body = api("POST", "/segments", {"name": "s", "rules": rules})
    assert set(body["error"]["fields"]) == {"rules.all[0].op", "rules.all[1].not"}  # all at once
    assert not Segment.objects.exists()


def test_counting_a_segment_whose_list_was_deleted_is_a_422(api: Caller) -> None:
    gone = make_contact_list(name="gone")
    segment = Segment.objects.create(name="members", rules={"list": "gone"})
    gone.delete()
    response, body = api("GET", f"/segments/{segment.pk}/count", documented="/segments/{id}/count")
    assert (response.status_code, body["error"]["code"]) == (422, "segment_unusable")


# --- templates --------------------------------------------------------------------------------


def test_templates_show_their_parameters_and_filter_by_name_and_status(api: Caller) -> None:
    account = make_account()
    promo = make_template(
        account=account,
        name="promo",
        body_text="Hi {{1}}, use {{2}}",
        body_param_count=2,
        body_examples=["Ana", "SALE20"],
        header_format=HeaderFormat.IMAGE,
        header_example="https://cdn.example/x.jpg",
        buttons=[
            {
                "index": 0,
                "type": "URL",
                "text": "Shop",
                "url": "https://shop.example/{{1}}",
                "param": "required",
                "example": "summer",
            }
        ],
        components=[{"type": "BODY", "text": "Hi {{1}}, use {{2}}"}],
    )
    make_template(account=account, name="old", status=TemplateStatus.PAUSED)
    response, page = api("GET", "/templates", query={"name": "promo"})
    assert response.status_code == 200
    [shown] = page["data"]
    assert shown["id"] == promo.pk and shown["status"] == "APPROVED"
    assert shown["header"] == {"format": "IMAGE", "text": ""}
    assert [slot["path"] for slot in shown["param_slots"]] == [
        ["header"],
        ["body", "1"],
        ["body", "2"],
        ["buttons", "0"],
    ]
    assert shown["param_slots"][1]["example"] == "Ana"
    assert "components" not in shown
    _, paused = api("GET", "/templates", query={"status": "PAUSED"})
    assert [row["name"] for row in paused["data"]] == ["old"]
    response, detail = api("GET", f"/templates/{promo.pk}", documented="/templates/{id}")
    assert response.status_code == 200
    assert detail["components"] == [{"type": "BODY", "text": "Hi {{1}}, use {{2}}"}]
    response, bad = api("GET", "/templates", query={"status": "approved"})
    assert response.status_code == 400 and "status" in bad["error"]["fields"]


def test_a_key_on_some_numbers_reads_only_their_accounts_templates(number: Any) -> None:
    ours = make_template(account=number.account, name="ours")
    theirs = make_template(account=make_account(), name="theirs")
    _, raw = api_key_create(name="r", scopes=["read"], phone_number_ids=[number.phone_number_id])
    reader = Caller(raw)
    _, page = reader("GET", "/templates")
    assert [row["name"] for row in page["data"]] == ["ours"]
    assert (
        reader("GET", f"/templates/{ours.pk}", documented="/templates/{id}")[0].status_code == 200
    )
    response, body = reader("GET", f"/templates/{theirs.pk}", documented="/templates/{id}")
    assert (response.status_code, body["error"]["code"]) == (404, "not_found")
    _, everything = Caller(issued("read"))("GET", "/templates")
    assert {row["name"] for row in everything["data"]} == {"ours", "theirs"}


def test_a_removed_template_says_so(api: Caller) -> None:
    template = make_template(account=make_account(), removed_upstream_at=timezone.now())
    _, detail = api("GET", f"/templates/{template.pk}", documented="/templates/{id}")
    assert detail["removed_upstream"] is True


# --- scopes and every documented status --------------------------------------------------------


def test_a_read_key_reads_but_does_not_write_and_a_send_key_does_neither(
    send_only: str,
) -> None:
    reader = Caller(issued("read"))
    sender = Caller(send_only)
    segment = Segment.objects.create(
        name="all", rules={"field": "name", "op": "exists", "value": True}
    )
    template = make_template(account=make_account())
    reads = [
        ("/lists", None),
        ("/segments", None),
        (f"/segments/{segment.pk}/count", "/segments/{id}/count"),
        ("/templates", None),
        (f"/templates/{template.pk}", "/templates/{id}"),
    ]
    for path, doc in reads:
        assert reader("GET", path, documented=doc)[0].status_code == 200
        response, body = sender("GET", path, documented=doc)
        assert (response.status_code, body["error"]["code"]) == (403, "scope_missing")
    for caller in (reader, sender):
        for path, body in (
            ("/lists", {"name": "x"}),
            ("/segments", {"name": "x", "rules": {"list": "x"}}),
        ):
            response, answer = caller("POST", path, body)
            assert (response.status_code, answer["error"]["code"]) == (403, "scope_missing")
    assert not ContactList.objects.exists()


def test_every_documented_status_of_post_lists_is_real(api: Caller, send_only: str) -> None:
    body = {"name": "a"}
    key = {"Idempotency-Key": "k"}
    seen = {
        api("POST", "/lists", body, **key)[0].status_code,  # 201
        api("POST", "/lists", body, **key)[0].status_code,  # 200
        api("POST", "/lists", {"name": 1})[0].status_code,  # 400
        api("POST", "/lists", body, key=UNKNOWN_KEY)[0].status_code,  # 401
        api("POST", "/lists", body, key=send_only)[0].status_code,  # 403
        api("POST", "/lists", body)[0].status_code,  # 409: the name
        api("POST", "/lists", {"name": "a", "description": "x" * 70_000})[0].status_code,  # 413
        api("POST", "/lists", body, content_type="text/plain")[0].status_code,  # 415
        api("DELETE", "/lists", documented_method="post")[0].status_code,  # 405
        *{limited()("POST", "/lists", {"name": "b"})[0].status_code},  # 201
    }
    tight = limited()
    seen |= {tight("POST", "/lists", {"name": n})[0].status_code for n in ("c", "d")}  # 429
    assert seen == documented("/lists", "post")


def test_every_documented_status_of_post_segments_is_real(api: Caller, send_only: str) -> None:
    rules = {"field": "name", "op": "exists", "value": True}
    body = {"name": "a", "rules": rules}
    key = {"Idempotency-Key": "k"}
    big = {"name": "b", "rules": rules, "description": "x" * 70_000}
    seen = {
        api("POST", "/segments", body, **key)[0].status_code,  # 201
        api("POST", "/segments", body, **key)[0].status_code,  # 200
        api("POST", "/segments", {"name": "b"})[0].status_code,  # 400
        api("POST", "/segments", body, key=UNKNOWN_KEY)[0].status_code,  # 401
        api("POST", "/segments", body, key=send_only)[0].status_code,  # 403
        api("POST", "/segments", body)[0].status_code,  # 409
        api("POST", "/segments", big)[0].status_code,  # 413
        api("POST", "/segments", body, content_type="text/plain")[0].status_code,  # 415
        api("POST", "/segments", {"name": "c", "rules": {"x": 1}})[0].status_code,  # 422
        api("PUT", "/segments", documented_method="post")[0].status_code,  # 405
    }
    tight = limited()
    seen |= {
        tight("POST", "/segments", {"name": n, "rules": rules})[0].status_code for n in "de"
    }  # 201, 429
    assert seen == documented("/segments", "post")


@pytest.mark.parametrize("path", ["/lists", "/segments", "/templates"])
def test_every_documented_status_of_a_listing_is_real(
    api: Caller, send_only: str, path: str
) -> None:
    seen = {
        api("GET", path)[0].status_code,  # 200
        api("GET", path, query={"limit": 0})[0].status_code,  # 400
        api("GET", path, key=UNKNOWN_KEY)[0].status_code,  # 401
        api("GET", path, key=send_only)[0].status_code,  # 403
        api("PATCH", path, documented_method="get")[0].status_code,  # 405
    }
    tight = limited()
    seen |= {tight("GET", path)[0].status_code for _ in range(2)}  # 200, 429
    assert seen == documented(path, "get")


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/contacts", {"limit": ""}),
        ("/lists", {"limit": ""}),
        ("/segments", {"limit": ""}),
        ("/templates", {"limit": ""}),
        ("/templates", {"status": ""}),
    ],
)
def test_a_query_value_given_empty_is_refused_not_taken_as_absent(
    api: Caller, path: str, query: dict[str, str]
) -> None:
    """``?limit=`` is not a number and ``?status=`` not a status: left out, they default;
    given empty, the schema refuses them, and so does the API."""
    assert api("GET", path)[0].status_code == 200
    response, body = api("GET", path, query=query)
    assert response.status_code == 400
    assert set(body["error"]["fields"]) == set(query)


def test_every_documented_status_of_counting_a_segment_is_real(api: Caller, send_only: str) -> None:
    ok = Segment.objects.create(name="ok", rules={"field": "name", "op": "exists", "value": True})
    make_contact_list(name="soon gone")
    broken = Segment.objects.create(name="broken", rules={"list": "soon gone"})
    ContactList.objects.filter(name="soon gone").delete()
    doc = "/segments/{id}/count"

    def call(pk: int, caller: Caller = api, **kwargs: Any) -> int:
        return caller("GET", f"/segments/{pk}/count", documented=doc, **kwargs)[0].status_code

    tight = limited()
    seen = {
        call(ok.pk),  # 200
        call(ok.pk, key=UNKNOWN_KEY),  # 401
        call(ok.pk, key=send_only),  # 403
        call(ok.pk + 1000),  # 404
        call(broken.pk),  # 422
        api("POST", f"/segments/{ok.pk}/count", documented=doc, documented_method="get")[
            0
        ].status_code,  # 405
        call(ok.pk, tight),
        call(ok.pk, tight),  # 429
    }
    assert seen == documented(doc, "get")


def test_every_documented_status_of_a_template_is_real(api: Caller, send_only: str) -> None:
    template = make_template(account=make_account())
    doc = "/templates/{id}"

    def call(pk: int, caller: Caller = api, **kwargs: Any) -> int:
        return caller("GET", f"/templates/{pk}", documented=doc, **kwargs)[0].status_code

    tight = limited()
    seen = {
        call(template.pk),  # 200
        call(template.pk, key=UNKNOWN_KEY),  # 401
        call(template.pk, key=send_only),  # 403
        call(2**64),  # 404, without asking the database
        api("DELETE", f"/templates/{template.pk}", documented=doc, documented_method="get")[
            0
        ].status_code,  # 405
        call(template.pk, tight),
        call(template.pk, tight),  # 429
    }
    assert seen == documented(doc, "get")


def test_a_campaign_outcome_rule_is_checked_against_real_campaigns(api: Caller) -> None:
    campaign = make_campaign()
    response, _ = api(
        "POST",
        "/segments",
        {"name": "readers", "rules": {"campaign": campaign.pk, "outcome": "read"}},
    )
    assert response.status_code == 201
