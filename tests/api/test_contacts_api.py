"""/api/v1/contacts: the batched upsert, reading, opt-out and opt-in, erasure by DELETE.

Every response is checked against the OpenAPI description, and each operation's documented
statuses are all provoked (none documented but unreal, none answered but undocumented).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from django.http import HttpResponse
from django.test import Client, override_settings

from campaigns.models import Contact, ContactList, ListMembership, Segment
from delivery.api.contacts import API_OPT_OUT_REASON, MAX_CONTACTS
from delivery.api.keys import api_key_create
from delivery.models import ApiCreated, MessageStatus
from tests.api.support import DOCUMENT, response_check
from tests.factories import make_campaign, make_contact, make_contact_list, make_message

pytestmark = pytest.mark.django_db

UNKNOWN_KEY = "wb_0123456789_nothing"


class Caller:
    """Calls one of the API's paths with a key; every answer checked against the document."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.client = Client()

    def __call__(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        documented: str | None = None,
        documented_method: str | None = None,
        key: str | None = None,
        raw: bytes | None = None,
        content_type: str = "application/json",
        query: dict[str, Any] | None = None,
        **headers: str,
    ) -> tuple[HttpResponse, Any]:
        key = self.key if key is None else key
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = f"/api/v1{path}"
        if query:
            url = f"{url}?{urlencode(query)}"
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        response = self.client.generic(
            method, url, data=data, content_type=content_type, headers=headers
        )
        template = documented or path
        checked = response_check(template, (documented_method or method).lower(), response)
        return response, checked


def issued(*scopes: str, rps: int = 100_000) -> str:
    """A key on every number (templates are read per the key's numbers)."""
    _, raw = api_key_create(
        name="k", scopes=list(scopes), requests_per_second=rps, all_numbers=True
    )
    return raw


@pytest.fixture
def api() -> Caller:
    return Caller(issued("contacts"))


def upsert(api: Caller, contacts: list[dict[str, Any]], **headers: str) -> Any:
    response, body = api("POST", "/contacts", {"contacts": contacts}, **headers)
    assert response.status_code == 201, body
    return body


# --- the upsert -------------------------------------------------------------------------------


def test_a_batch_creates_then_updates_contacts_their_attributes_and_lists(api: Caller) -> None:
    body = upsert(
        api,
        [
            {
                "phone": "+55 11 98765-4321",
                "name": "Ana",
                "attributes": {"city": "Recife", "orders": 3, "vip": True, "gone": None},
                "lists": ["newsletter", "vip"],
                "opted_in": True,
            },
            {"user_id": "US.13491208655302741918", "lists": ["newsletter"]},
        ],
    )
    assert body == {"created": 2, "updated": 0, "rejected": 0, "errors": {}}
    ana = Contact.objects.get(phone="+5511987654321")
    assert ana.name == "Ana"
    assert ana.attributes == {"city": "Recife", "orders": 3, "vip": True}  # null: no key
    assert ana.opted_in_at is not None
    assert sorted(ana.lists.values_list("name", flat=True)) == ["newsletter", "vip"]
    by_user_id = Contact.objects.get(user_id="US.13491208655302741918")
    assert by_user_id.phone is None
    assert list(by_user_id.lists.values_list("name", flat=True)) == ["newsletter"]
    assert ContactList.objects.count() == 2

    body = upsert(
        api,
        [
            {
                "phone": "+5511987654321",
                "name": "  ",
                "attributes": {"city": "Olinda", "vip": None, "plan": "gold"},
                "lists": ["clients"],
            },
            {"phone": "+5511987654322", "name": "Bia"},
        ],
    )
    assert body == {"created": 1, "updated": 1, "rejected": 0, "errors": {}}
    ana.refresh_from_db()
    assert ana.name == "Ana"  # a blank name keeps the contact's
    assert ana.attributes == {"city": "Olinda", "orders": 3, "plan": "gold"}
    assert sorted(ana.lists.values_list("name", flat=True)) == ["clients", "newsletter", "vip"]


def test_an_unchanged_contact_keeps_its_updated_at(api: Caller) -> None:
    upsert(api, [{"phone": "+5511987654321", "name": "Ana", "attributes": {"a": "1"}}])
    before = Contact.objects.get().updated_at
    body = upsert(api, [{"phone": "+5511987654321", "name": "Ana", "attributes": {"a": "1"}}])
    assert body["updated"] == 1
    assert Contact.objects.get().updated_at == before


def test_opted_in_false_opts_out_and_skips_pending_campaign_rows(api: Caller) -> None:
    contact = make_contact(phone="+5511987654321")
    campaign = make_campaign()
    pending = make_message(campaign=campaign, contact=contact, to=contact.phone)
    body = upsert(api, [{"phone": contact.phone, "opted_in": False}])
    assert body["updated"] == 1
    contact.refresh_from_db()
    assert contact.opted_out_at is not None
    assert contact.opted_out_reason == API_OPT_OUT_REASON
    pending.refresh_from_db()
    assert pending.status == MessageStatus.SKIPPED
    # A later "opted_in": true records no consent over the opt-out: the person's word stands.
    upsert(api, [{"phone": contact.phone, "opted_in": True}])
    contact.refresh_from_db()
    assert contact.opted_out_at is not None and contact.opted_in_at is None


def test_items_that_cannot_be_used_are_rejected_by_index_and_the_rest_written(
    api: Caller,
) -> None:
    make_contact(phone="+5511987650000", user_id="BR.1111")
    body = upsert(
        api,
        [
            {"phone": "+5511987654321"},
            {"phone": "11987654321"},  # no + and country code
            {"phone": "+1 555 not"},  # letters
            {"phone": "+55 11 98765-4321"},  # contacts[0] again
            {"user_id": "not a user id"},
            {"phone": "   "},
            {"phone": "+5511987650000"},
            {"user_id": "BR.1111"},  # the same person as contacts[6]
        ],
    )
    assert body["created"] == 1 and body["updated"] == 1 and body["rejected"] == 6
    assert set(body["errors"]) == {
        "contacts[1].phone",
        "contacts[2].phone",
        "contacts[3].phone",
        "contacts[4].user_id",
        "contacts[5].phone",
        "contacts[7].user_id",
    }
    assert "contacts[0]" in body["errors"]["contacts[3].phone"]
    assert "contacts[6]" in body["errors"]["contacts[7].user_id"]
    assert Contact.objects.count() == 2


def test_a_malformed_body_is_refused_whole_naming_each_field(api: Caller) -> None:
    response, body = api(
        "POST",
        "/contacts",
        {
            "contacts": [
                {"phone": "+5511987654321", "user_id": "US.1"},
                {"name": "no address"},
                {"phone": "+5511987654322", "attributes": {"phone": "x", "n": [1]}},
                {"phone": "+5511987654323", "opted_in": None, "lists": ["", "ok"]},
                {"phone": 5511987654324, "colour": "red"},
                "not an object",
            ],
            "extra": 1,
        },
    )
    assert response.status_code == 400
    assert body["error"]["code"] == "invalid_request"
    assert set(body["error"]["fields"]) == {
        "extra",
        "contacts[0].phone",
        "contacts[1].phone",
        "contacts[2].attributes.phone",
        "contacts[2].attributes.n",
        "contacts[3].opted_in",
        "contacts[3].lists[0]",
        "contacts[4].phone",
        "contacts[4].colour",
        "contacts[5]",
    }
    assert not Contact.objects.exists()
    for bad in ({}, {"contacts": []}, {"contacts": {}}):
        response, body = api("POST", "/contacts", bad)
        assert response.status_code == 400 and "contacts" in body["error"]["fields"]


def test_ten_thousand_contacts_in_one_request_and_not_one_more(api: Caller) -> None:
    contacts = [
        {"phone": f"+55119{n:08d}", "name": f"N{n}", "attributes": {"n": n}, "lists": ["big"]}
        for n in range(MAX_CONTACTS)
    ]
    body = upsert(api, contacts)
    assert body == {"created": MAX_CONTACTS, "updated": 0, "rejected": 0, "errors": {}}
    assert Contact.objects.count() == MAX_CONTACTS
    assert ListMembership.objects.filter(contact_list__name="big").count() == MAX_CONTACTS
    body = upsert(api, contacts)
    assert body["updated"] == MAX_CONTACTS
    response, body = api(
        "POST", "/contacts", {"contacts": [*contacts, {"phone": "+5511999999999"}]}
    )
    assert response.status_code == 400
    assert "contacts" in body["error"]["fields"]
    assert Contact.objects.count() == MAX_CONTACTS


def test_an_idempotent_replay_writes_nothing_twice(api: Caller) -> None:
    contacts = [{"phone": "+5511987654321", "lists": ["a"]}, {"user_id": "US.77", "lists": ["b"]}]
    first = upsert(api, contacts, **{"Idempotency-Key": "sync-1"})
    assert first["created"] == 2
    snapshot = (Contact.objects.count(), ListMembership.objects.count())
    Contact.objects.filter(phone="+5511987654321").update(name="changed since")
    response, again = api(
        "POST", "/contacts", {"contacts": contacts}, **{"Idempotency-Key": "sync-1"}
    )
    assert response.status_code == 200 and response["Idempotent-Replayed"] == "true"
    assert again == first  # the first answer, though a write now would say "updated"
    assert (Contact.objects.count(), ListMembership.objects.count()) == snapshot
    assert Contact.objects.get(phone="+5511987654321").name == "changed since"
    assert ApiCreated.objects.count() == 1
    response, body = api(
        "POST", "/contacts", {"contacts": contacts[:1]}, **{"Idempotency-Key": "sync-1"}
    )
    assert response.status_code == 409
    assert body["error"]["code"] == "idempotency_key_reused"


@override_settings(API_CONTACTS_MAX_BODY_BYTES=2048)
def test_the_body_cap_is_its_own_setting(api: Caller) -> None:
    response, body = api("POST", "/contacts", {"contacts": [{"phone": "+5511987654321"}] * 100})
    assert response.status_code == 413
    assert body["error"]["code"] == "payload_too_large"
    response, _ = api("POST", "/contacts", {"contacts": [{"phone": "+5511987654321"}]})
    assert response.status_code == 201


# --- scopes -----------------------------------------------------------------------------------


def test_writing_needs_the_contacts_scope_reading_contacts_or_read(number: Any) -> None:
    contact = make_contact(phone="+5511987654321")
    _, send_only = api_key_create(name="s", phone_number_ids=[number.phone_number_id])
    reader = Caller(issued("read"))
    sender = Caller(send_only)
    batch = {"contacts": [{"phone": "+5511987654322"}]}
    for caller in (sender, reader):
        for method, path, body, documented in (
            ("POST", "/contacts", batch, None),
            ("DELETE", f"/contacts/{contact.pk}", None, "/contacts/{id}"),
            ("POST", f"/contacts/{contact.pk}/opt-out", None, "/contacts/{id}/opt-out"),
            ("POST", f"/contacts/{contact.pk}/opt-in", None, "/contacts/{id}/opt-in"),
        ):
            response, answer = caller(method, path, body, documented=documented)
            assert (response.status_code, answer["error"]["code"]) == (403, "scope_missing")
    for method, path, documented in (
        ("GET", "/contacts", None),
        ("GET", f"/contacts/{contact.pk}", "/contacts/{id}"),
    ):
        response, answer = sender(method, path, documented=documented)
        assert (response.status_code, answer["error"]["code"]) == (403, "scope_missing")
        response, _ = reader(method, path, documented=documented)
        assert response.status_code == 200
    assert Contact.objects.count() == 1
    contact.refresh_from_db()
    assert contact.opted_out_at is None


# --- reading ----------------------------------------------------------------------------------


def test_a_contact_is_shown_with_its_attributes_lists_and_opt_out(api: Caller) -> None:
    contact = make_contact(
        phone="+5511987654321", name="Ana", attributes={"city": "Recife"}, user_id="BR.5"
    )
    for name in ("b-list", "a-list"):
        ListMembership.objects.create(contact_list=make_contact_list(name=name), contact=contact)
    response, body = api("GET", f"/contacts/{contact.pk}", documented="/contacts/{id}")
    assert response.status_code == 200
    assert body["phone"] == "+5511987654321" and body["user_id"] == "BR.5"
    assert body["attributes"] == {"city": "Recife"}
    assert body["lists"] == ["a-list", "b-list"]
    assert body["opted_out"] is False and body["opted_out_at"] is None
    for missing in (contact.pk + 1000, 2**63, 2**64):
        response, body = api("GET", f"/contacts/{missing}", documented="/contacts/{id}")
        assert (response.status_code, body["error"]["code"]) == (404, "not_found")


def test_opt_out_skips_pending_campaign_rows_and_opt_in_lifts_it(api: Caller) -> None:
    contact = make_contact(phone="+5511987654321")
    campaign = make_campaign()
    pending = make_message(campaign=campaign, contact=contact, to=contact.phone)
    path, documented = f"/contacts/{contact.pk}/opt-out", "/contacts/{id}/opt-out"
    response, body = api("POST", path, documented=documented)
    assert response.status_code == 200
    assert body["opted_out"] is True and body["opted_out_reason"] == API_OPT_OUT_REASON
    first_at = body["opted_out_at"]
    pending.refresh_from_db()
    assert pending.status == MessageStatus.SKIPPED
    _, body = api("POST", path, documented=documented)
    assert body["opted_out_at"] == first_at  # twice keeps the first
    response, body = api(
        "POST", f"/contacts/{contact.pk}/opt-in", documented="/contacts/{id}/opt-in"
    )
    assert response.status_code == 200
    assert body["opted_out"] is False and body["opted_in_at"] is not None
    response, body = api(
        "POST", f"/contacts/{contact.pk + 99}/opt-in", documented="/contacts/{id}/opt-in"
    )
    assert response.status_code == 404


def _page_ids(api: Caller, query: dict[str, Any]) -> tuple[list[int], str | None]:
    response, body = api("GET", "/contacts", query=query)
    assert response.status_code == 200, body
    return [row["id"] for row in body["data"]], body["next_cursor"]


def test_pages_miss_and_repeat_nothing_while_contacts_are_added(api: Caller) -> None:
    first = [make_contact().pk for _ in range(25)]
    seen: list[int] = []
    added: list[int] = []
    cursor: str | None = None
    while True:
        query: dict[str, Any] = {"limit": 7}
        if cursor:
            query["cursor"] = cursor
        ids, cursor = _page_ids(api, query)
        seen.extend(ids)
        if len(added) < 6:  # contacts arrive between pages
            added.extend(make_contact().pk for _ in range(2))
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    assert seen == sorted(seen)
    assert set(first) | set(added) == set(seen)


def test_filters_by_phone_user_id_list_and_segment(api: Caller) -> None:
    vip = make_contact_list(name="vip")
    ana = make_contact(phone="+5511987654321", contact_list=vip, attributes={"city": "Recife"})
    bia = make_contact(phone="+5511987654322", contact_list=vip, user_id="BR.9")
    make_contact(phone="+5511987654323", attributes={"city": "Recife"})
    Segment.objects.create(name="recife", rules={"field": "city", "op": "eq", "value": "Recife"})
    assert _page_ids(api, {"phone": "+55 11 98765-4321"})[0] == [ana.pk]
    assert _page_ids(api, {"user_id": "BR.9"})[0] == [bia.pk]
    assert _page_ids(api, {"list": "vip"})[0] == [ana.pk, bia.pk]
    assert _page_ids(api, {"list": "vip", "segment": "recife"})[0] == [ana.pk]
    for nothing in ({"list": "nobody"}, {"segment": "nobody"}, {"phone": "garbage"}):
        assert _page_ids(api, nothing)[0] == []


def test_a_segment_whose_list_was_deleted_is_a_422(api: Caller) -> None:
    gone = make_contact_list(name="gone")
    Segment.objects.create(name="members", rules={"list": "gone"})
    gone.delete()
    response, body = api("GET", "/contacts", query={"segment": "members"})
    assert (response.status_code, body["error"]["code"]) == (422, "segment_unusable")
    assert body["error"]["fields"] == {"rules.list": body["error"]["fields"]["rules.list"]}


def test_erasing_through_the_api_leaves_a_404(api: Caller) -> None:
    contact = make_contact(phone="+5511987654321", name="Ana")
    response, body = api("DELETE", f"/contacts/{contact.pk}", documented="/contacts/{id}")
    assert response.status_code == 200
    assert body["contact_id"] == contact.pk and body["placeholder"].startswith("erased-")
    response, _ = api("GET", f"/contacts/{contact.pk}", documented="/contacts/{id}")
    assert response.status_code == 404
    response, _ = api("DELETE", f"/contacts/{contact.pk}", documented="/contacts/{id}")
    assert response.status_code == 404


# --- every documented status, provoked ---------------------------------------------------------


def documented(path: str, method: str) -> set[int]:
    return {int(code) for code in DOCUMENT["paths"][path][method]["responses"]}


def limited() -> Caller:
    """A key with one request a second: its second call is a 429."""
    return Caller(issued("contacts", rps=1))


def twice(caller: Caller, *args: Any, **kwargs: Any) -> set[int]:
    return {caller(*args, **kwargs)[0].status_code for _ in range(2)}


@override_settings(API_CONTACTS_MAX_BODY_BYTES=2048)
def test_every_documented_status_of_post_contacts_is_real(api: Caller, number: Any) -> None:
    _, send_only = api_key_create(name="s", phone_number_ids=[number.phone_number_id])
    batch = {"contacts": [{"phone": "+5511987654321"}]}
    key = {"Idempotency-Key": "k1"}
    seen = {
        api("POST", "/contacts", batch, **key)[0].status_code,  # 201
        api("POST", "/contacts", batch, **key)[0].status_code,  # 200, replayed
        api("POST", "/contacts", {"contacts": "x"})[0].status_code,  # 400
        api("POST", "/contacts", batch, key=UNKNOWN_KEY)[0].status_code,  # 401
        api("POST", "/contacts", batch, key=send_only)[0].status_code,  # 403
        api("POST", "/contacts", {"contacts": [{"user_id": "US.1"}]}, **key)[0].status_code,
        api("POST", "/contacts", {"contacts": [{"phone": "+1" * 2000}]})[0].status_code,  # 413
        api("POST", "/contacts", batch, content_type="text/plain")[0].status_code,  # 415
        api("PUT", "/contacts", batch, documented_method="post")[0].status_code,  # 405
        *twice(limited(), "POST", "/contacts", batch),  # 201, 429
    }
    assert seen == documented("/contacts", "post")


def test_every_documented_status_of_get_contacts_is_real(api: Caller, number: Any) -> None:
    _, send_only = api_key_create(name="s", phone_number_ids=[number.phone_number_id])
    Segment.objects.create(name="broken", rules={"list": "nowhere"})
    seen = {
        api("GET", "/contacts")[0].status_code,  # 200
        api("GET", "/contacts", query={"cursor": "nope"})[0].status_code,  # 400
        api("GET", "/contacts", key=UNKNOWN_KEY)[0].status_code,  # 401
        api("GET", "/contacts", key=send_only)[0].status_code,  # 403
        api("PATCH", "/contacts", documented_method="get")[0].status_code,  # 405
        api("GET", "/contacts", query={"segment": "broken"})[0].status_code,  # 422
        *twice(limited(), "GET", "/contacts"),  # 200, 429
    }
    assert seen == documented("/contacts", "get")


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("get", ""), ("delete", ""), ("post", "/opt-out"), ("post", "/opt-in")],
)
def test_every_documented_status_of_one_contact_is_real(
    api: Caller, number: Any, method: str, suffix: str
) -> None:
    _, send_only = api_key_create(name="s", phone_number_ids=[number.phone_number_id])
    template = f"/contacts/{{id}}{suffix}"

    def call(caller: Caller, contact_id: int, **kwargs: Any) -> int:
        path = f"/contacts/{contact_id}{suffix}"
        return caller(method.upper(), path, documented=template, **kwargs)[0].status_code

    pk = make_contact().pk
    tight = limited()
    seen = {
        call(api, pk + 1000),  # 404
        call(api, pk, key=UNKNOWN_KEY),  # 401
        call(api, pk, key=send_only),  # 403
        api("PUT", f"/contacts/{pk}{suffix}", documented=template, documented_method=method)[
            0
        ].status_code,  # 405
        call(tight, pk),  # 200 (a DELETE erases the contact)
        call(tight, pk),  # 429
    }
    assert seen == documented(template, method)
