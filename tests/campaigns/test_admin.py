"""The admin: every model's pages render, secrets stay secret, machine rows stay read-only."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.contrib import admin
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from campaigns.models import PhoneNumber, Template
from delivery.models import DeadLetter, Message
from tests.factories import (
    make_account,
    make_campaign,
    make_contact,
    make_contact_list,
    make_message,
    make_phone_number,
)
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db

TOKEN = "EAAG-very-secret-token-4f2a9c"
APPS = ("campaigns", "delivery", "webhooks")


@pytest.fixture
def staff(client: Client, django_user_model: Any) -> Client:
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


@pytest.fixture
def rows() -> dict[str, Any]:
    number = make_phone_number(access_token=TOKEN, phone_number_id="PN1")
    contact_list = make_contact_list(name="vip")
    contact = make_contact(phone="+5511999990001", name="Ana", contact_list=contact_list)
    campaign = make_campaign(phone_number=number, lists=[contact_list])
    message = make_message(campaign=campaign, to=contact.phone, contact=contact, status="dead")
    DeadLetter.objects.create(
        message=message,
        campaign=campaign,
        phone_number=number,
        error_code=131026,
        error_title="Message undeliverable",
    )
    body = b'{"object":"whatsapp_business_account","entry":[]}'
    WebhookEvent.objects.create(body=body, body_sha256=hashlib.sha256(body).hexdigest())
    return {"number": number, "campaign": campaign, "message": message}


def admin_url(model: type, view: str, *args: object) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def registered() -> list[type]:
    return [m for m in admin.site._registry if m._meta.app_label in APPS]


def test_every_model_is_registered() -> None:
    names = {m.__name__ for m in registered()}
    assert {
        "BusinessAccount",
        "PhoneNumber",
        "Template",
        "ContactList",
        "Contact",
        "Campaign",
        "Message",
        "DeadLetter",
        "WebhookEvent",
    } <= names


def test_every_list_add_and_change_page_renders(staff: Client, rows: dict[str, Any]) -> None:
    for model in registered():
        assert staff.get(admin_url(model, "changelist")).status_code == 200, model
        add = staff.get(admin_url(model, "add")).status_code
        assert add in (200, 403), model
        obj = model._default_manager.first()
        if obj is not None:
            assert staff.get(admin_url(model, "change", obj.pk)).status_code == 200, model


def test_admin_is_behind_login(client: Client, rows: dict[str, Any]) -> None:
    response = client.get(admin_url(PhoneNumber, "changelist"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_access_token_never_rendered(staff: Client, rows: dict[str, Any]) -> None:
    number = rows["number"]
    for url in (
        admin_url(PhoneNumber, "change", number.pk),
        admin_url(PhoneNumber, "changelist"),
        admin_url(PhoneNumber, "history", number.pk),
    ):
        html = staff.get(url).content.decode()
        assert TOKEN not in html, url
    change = staff.get(admin_url(PhoneNumber, "change", number.pk)).content.decode()
    assert 'type="password"' in change and 'name="access_token"' in change


def number_form(number: PhoneNumber, **overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "phone_number_id": number.phone_number_id,
        "display_phone_number": number.display_phone_number,
        "account": number.account_id,
        "access_token": "",
        "api_base_url": "",
        "rate_per_second": 80,
        "transactional_reserve": 0.2,
        "paused_until_0": "",
        "paused_until_1": "",
        "paused_reason": "",
    }
    data.update(overrides)
    return data


def test_blank_token_on_edit_keeps_the_current_one(staff: Client, rows: dict[str, Any]) -> None:
    number = rows["number"]
    response = staff.post(
        admin_url(PhoneNumber, "change", number.pk), number_form(number, rate_per_second=500)
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    number.refresh_from_db()
    assert (number.access_token, number.rate_per_second) == (TOKEN, 500)


def test_new_token_replaces_the_old_one(staff: Client, rows: dict[str, Any]) -> None:
    number = rows["number"]
    staff.post(admin_url(PhoneNumber, "change", number.pk), number_form(number, access_token="n"))
    number.refresh_from_db()
    assert number.access_token == "n"


def test_new_number_needs_a_token(staff: Client) -> None:
    account = make_account()
    data = number_form(
        PhoneNumber(phone_number_id="PN9", display_phone_number="+1555", account=account)
    )
    response = staff.post(admin_url(PhoneNumber, "add"), data)
    assert response.status_code == 200
    assert "A new number needs its access token." in response.content.decode()
    response = staff.post(admin_url(PhoneNumber, "add"), {**data, "access_token": "tok"})
    assert response.status_code == 302
    assert PhoneNumber.objects.get(phone_number_id="PN9").access_token == "tok"


def test_template_params_are_parsed_from_the_body(staff: Client) -> None:
    account = make_account()
    data = {
        "account": account.pk,
        "name": "promo",
        "language": "en_US",
        "category": "MARKETING",
        "status": "APPROVED",
        "body_text": "Hi {{1}}, use {{2}}",
        "components": "[]",
    }
    assert staff.post(admin_url(Template, "add"), data).status_code == 302
    template = Template.objects.get(name="promo")
    assert template.body_param_count == 2
    response = staff.post(admin_url(Template, "add"), {**data, "body_text": "{{1}} {{x}}"})
    assert "mixes positional" in response.content.decode()


def test_messages_and_webhook_events_are_read_only(staff: Client, rows: dict[str, Any]) -> None:
    message = rows["message"]
    assert staff.get(admin_url(Message, "add")).status_code == 403
    page = staff.get(admin_url(Message, "change", message.pk)).content.decode()
    assert 'name="_save"' not in page
    assert staff.post(admin_url(Message, "delete", message.pk), {"post": "yes"}).status_code == 403
    assert Message.objects.filter(pk=message.pk).exists()
    assert staff.get(admin_url(WebhookEvent, "add")).status_code == 403
    event = WebhookEvent.objects.get()
    page = staff.get(admin_url(WebhookEvent, "change", event.pk)).content.decode()
    assert 'name="_save"' not in page


def test_launched_campaign_is_not_editable_nor_deletable(
    staff: Client, rows: dict[str, Any]
) -> None:
    campaign = rows["campaign"]
    campaign.status = "running"
    campaign.save()
    page = staff.get(admin_url(type(campaign), "change", campaign.pk)).content.decode()
    assert 'name="_save"' not in page and "Audience 1" in page
    delete = staff.get(admin_url(type(campaign), "delete", campaign.pk)).content.decode()
    assert "has messages: cancel it instead" in delete


def changelist_queries(staff: Client, model: type) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert staff.get(admin_url(model, "changelist")).status_code == 200
    return len(queries)


def test_list_pages_cost_the_same_with_more_rows(staff: Client, rows: dict[str, Any]) -> None:
    campaign = rows["campaign"]
    # The first page of a session also reads the person's preferences (kept in the session).
    assert staff.get("/admin/").status_code == 200
    few = {m: changelist_queries(staff, m) for m in (Message, type(rows["campaign"]))}
    contacts_few = changelist_queries(staff, type(rows["message"].contact))
    for i in range(20):
        other = make_campaign(phone_number=campaign.phone_number, template=campaign.template)
        make_message(campaign=other, to=f"+55119999{i:05d}")
        make_contact(phone=f"+55219999{i:05d}")
    assert {m: changelist_queries(staff, m) for m in few} == few
    assert changelist_queries(staff, type(rows["message"].contact)) == contacts_few


def test_a_contacts_parent_user_id_and_username_are_shown_read_only_and_found(
    staff: Client,
) -> None:
    from campaigns.models import Contact

    pablo = Contact.objects.create(
        phone="+16505551234",
        user_id="US.13491208655302741918",
        parent_user_id="US.ENT.11815799212886844830",
        username="pablomorales",
        name="Pablo",
    )
    make_contact(phone="+16505551235", name="pablomorales fan")
    page = staff.get(admin_url(Contact, "change", pablo.pk)).content.decode()
    assert "US.ENT.11815799212886844830" in page and "pablomorales" in page
    assert 'name="username"' not in page and 'name="parent_user_id"' not in page
    # Posting them changes nothing: Meta's callbacks are their only source.
    form = {"phone": pablo.phone, "user_id": pablo.user_id, "name": "Pablo", "attributes": ""}
    assert (
        staff.post(admin_url(Contact, "change", pablo.pk), {**form, "username": "x"}).status_code
        == 302
    )
    assert Contact.objects.get(pk=pablo.pk).username == "pablomorales"
    for term in ("pablomorales", "@pablomorales", "PabloMorales"):
        found = staff.get(admin_url(Contact, "changelist"), {"q": term}).context["cl"]
        names = {c.name for c in found.result_list}
        assert "Pablo" in names, term
    only_at = staff.get(admin_url(Contact, "changelist"), {"q": "@pablomorales"}).context["cl"]
    assert [c.pk for c in only_at.result_list] == [pablo.pk]


def test_a_contact_known_only_by_its_user_id_is_listed_added_and_found(staff: Client) -> None:
    from campaigns.models import Contact

    make_contact(phone="+5511999990001", name="Ana")
    url = admin_url(Contact, "add")
    base = {"phone": "", "name": "Bo", "attributes": "", "opted_in_at": "", "opted_out_at": ""}
    # Neither a phone nor a user id: refused by the form, nothing stored.
    response = staff.post(url, {**base, "user_id": ""})
    assert response.status_code == 200 and Contact.objects.count() == 1
    assert "A contact needs a phone or a WhatsApp user id." in response.content.decode()
    # A user id alone is a contact; its phone is stored empty (NULL), not "".
    assert staff.post(url, {**base, "user_id": "US.13491208655302741918"}).status_code == 302
    bo = Contact.objects.get(name="Bo")
    assert bo.phone is None and bo.user_id == "US.13491208655302741918"
    # A phone that is not E.164 is still refused.
    response = staff.post(url, {**base, "phone": "5511999990002", "user_id": ""})
    assert response.status_code == 200 and Contact.objects.count() == 2
    listing = staff.get(admin_url(Contact, "changelist")).content.decode()
    assert "US.13491208655302741918" in listing and "+5511999990001" in listing
    found = staff.get(admin_url(Contact, "changelist"), {"q": "US.13491208655302741918"})
    assert found.context["cl"].result_count == 1
    assert staff.get(admin_url(Contact, "change", bo.pk)).status_code == 200
