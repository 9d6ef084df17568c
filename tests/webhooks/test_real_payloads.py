"""Real payloads (tests/fixtures/real, each with its source in the README) through the live
view and the applier: answered 200, stored, nothing malformed, every effect applied.

Each effect test is a row of docs/webhooks.md. Where no public example of a code exists
(async 132015, 132016, 131031, 368, 131042, 131048 — see the README's "Not found"), the
production 131050 capture is used with only its error code and title changed.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from campaigns.models import (
    BusinessAccount,
    Campaign,
    CampaignStatus,
    Contact,
    PhoneNumber,
    Template,
)
from delivery.models import Message
from tests.factories import make_campaign, make_contact, make_contact_list, make_template
from tests.webhooks.support import URL, apply, make_message, meta_bytes, sign, statuses_of
from webhooks.models import InboundMessage, UnmatchedStatus, WebhookEvent, WebhookEventStatus
from webhooks.payloads import body_parse
from whatsblast.core.redis import get_redis

pytestmark = pytest.mark.django_db

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
WEBHOOK_DIRS = ("statuses", "inbound", "user_preferences", "templates", "account", "errors_async")
WABA_ID = "102290129340398"
PNID = "106540352242922"


def real(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REAL / f"{name}.json").read_text())
    return data


def webhook_fixtures() -> list[str]:
    return sorted(f"{d}/{p.stem}" for d in WEBHOOK_DIRS for p in (REAL / d).glob("*.json"))


def values(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [c["value"] for e in payload["entry"] for c in e["changes"]]


def post(client: Client, payload: dict[str, Any]) -> int:
    body = meta_bytes(payload)
    response = client.post(
        URL, data=body, content_type="application/json", headers={"X-Hub-Signature-256": sign(body)}
    )
    return int(response.status_code)


def deliver(client: Client, payload: dict[str, Any]) -> None:
    assert post(client, payload) == 200
    apply()


@pytest.fixture
def number() -> PhoneNumber:
    account = BusinessAccount.objects.create(waba_id=WABA_ID)
    return PhoneNumber.objects.create(
        phone_number_id=PNID,
        display_phone_number="15550783881",
        account=account,
        access_token="t",
        rate_per_second=80,
    )


@pytest.fixture(autouse=True)
def clean_buckets() -> None:
    for key in get_redis().scan_iter(f"wb:bucket:{{{PNID}}}*"):
        get_redis().delete(key)


_names = iter(range(1, 10_000))


def running_campaign(number: PhoneNumber, **fields: Any) -> Campaign:
    template = fields.pop("template", None) or make_template(
        account=number.account, name=f"promo_{next(_names)}"
    )
    return make_campaign(
        phone_number=number,
        template=template,
        lists=[make_contact_list()],
        status=CampaignStatus.RUNNING,
        **fields,
    )


# --- every real payload ------------------------------------------------------------------


@pytest.mark.parametrize("name", webhook_fixtures())
def test_every_real_payload_is_answered_200_and_applied_with_nothing_malformed(
    client: Client, number: PhoneNumber, name: str
) -> None:
    assert post(client, real(name)) == 200
    apply()
    event = WebhookEvent.objects.get()
    assert event.status == WebhookEventStatus.PROCESSED, event.error
    summary = event.summary
    assert summary, name
    assert not [k for k in summary if k.startswith("malformed")], summary
    # The fields we act on are never counted as ignored.
    assert not [k for k in summary if k.startswith("ignored.user_preferences")], summary
    assert not [k for k in summary if "template" in k and k.startswith("ignored")], summary


@pytest.mark.parametrize(
    "name",
    [n for n in webhook_fixtures() if n.startswith("inbound/")]
    + [
        "user_preferences/piusalfred_stop_batched_with_messages",
        "errors_async/pywa_value_errors_131000_beside_message",
    ],
)
def test_each_inbound_kind_is_stored_whoever_sent_it(
    client: Client, number: PhoneNumber, name: str
) -> None:
    payload = real(name)
    sent = [m for v in values(payload) for m in v.get("messages", [])]
    deliver(client, payload)
    rows = {r.wamid: r for r in InboundMessage.objects.all()}
    assert set(rows) == {m["id"] for m in sent}
    for m in sent:
        row = rows[m["id"]]
        assert row.from_phone or row.from_user_id
        assert row.phone_number_id == number.pk
        if m.get("from_user_id"):
            assert row.from_user_id == m["from_user_id"]
        assert row.type == m.get("type", row.type)


STATUS_FIXTURES = [n for n in webhook_fixtures() if n.startswith("statuses/") and "group" not in n]


@pytest.mark.parametrize("name", STATUS_FIXTURES)
def test_each_real_status_reaches_its_message(
    client: Client, number: PhoneNumber, name: str
) -> None:
    payload = real(name)
    statuses = [s for v in values(payload) for s in v.get("statuses", [])]
    for s in statuses:
        s.pop("biz_opaque_callback_data", None)
        make_message(phone_number=number, status="sending", wamid=s["id"])
    deliver(client, payload)
    assert not UnmatchedStatus.objects.exists()
    for s in statuses:
        message = Message.objects.get(wamid=s["id"])
        # `played` (a voice message) is recorded in the event only: no status of ours.
        expected = {"played": "sending"}.get(s["status"], s["status"])
        assert message.status == expected, (name, message.status)
        pricing = s.get("pricing", {})
        assert message.pricing_category == pricing.get("category", "")
        assert message.pricing_type == pricing.get("type", "")
        assert message.pricing_model == pricing.get("pricing_model", "")
        if s["status"] == "failed":
            assert message.last_error_code == s["errors"][0]["code"]


# --- business-scoped user ids ------------------------------------------------------------


def test_a_stop_from_a_user_id_without_a_phone_opts_the_contact_out(
    client: Client, number: PhoneNumber
) -> None:
    """Row: messages[] from_user_id only (no from)."""
    contact = make_contact(user_id="US.13491208655302741918")
    campaign = running_campaign(number)
    pending = make_message(
        phone_number=number, status="pending", campaign=campaign, contact=contact, to=contact.phone
    )
    payload = real("inbound/meta_doc_2026_02_bsuid_text_no_phone")
    values(payload)[0]["messages"][0]["text"]["body"] = "STOP"
    deliver(client, payload)
    contact.refresh_from_db()
    assert contact.opted_out_at is not None
    inbound = InboundMessage.objects.get()
    assert inbound.contact == contact and inbound.is_opt_out and inbound.from_phone == ""
    pending.refresh_from_db()
    assert pending.status == "skipped"


def test_a_reply_with_an_empty_from_is_matched_by_user_id(
    client: Client, number: PhoneNumber
) -> None:
    """Row: messages[] from "" (the Nov 2025 shape)."""
    contact = make_contact(user_id="user.93737...")
    deliver(client, real("inbound/meta_doc_2025_11_bsuid_text_empty_from"))
    inbound = InboundMessage.objects.get()
    assert inbound.contact == contact and not inbound.is_opt_out
    assert inbound.from_user_id == "user.93737..." and inbound.profile_name == "Sheena Nelson"


def test_a_status_naming_the_user_id_teaches_it_to_the_contact(
    client: Client, number: PhoneNumber
) -> None:
    """Row: statuses[] recipient_user_id."""
    payload = real("statuses/meta_doc_2026_02_bsuid_delivered_with_phone")
    status = values(payload)[0]["statuses"][0]
    contact = make_contact(phone="+" + status["recipient_id"])
    make_message(
        phone_number=number, status="sent", wamid=status["id"], contact=contact, to=contact.phone
    )
    deliver(client, payload)
    contact.refresh_from_db()
    assert contact.user_id == status["recipient_user_id"]


def test_a_user_id_held_by_another_contact_is_not_moved(
    client: Client, number: PhoneNumber
) -> None:
    """Row: statuses[] recipient_user_id (already someone's)."""
    payload = real("statuses/meta_doc_2026_02_bsuid_delivered_with_phone")
    status = values(payload)[0]["statuses"][0]
    holder = make_contact(user_id=status["recipient_user_id"])
    contact = make_contact(phone="+" + status["recipient_id"])
    make_message(
        phone_number=number, status="sent", wamid=status["id"], contact=contact, to=contact.phone
    )
    deliver(client, payload)
    contact.refresh_from_db()
    holder.refresh_from_db()
    assert contact.user_id is None and holder.user_id == status["recipient_user_id"]


def contacts_entries(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for v in values(payload) for c in v.get("contacts", []) if c.get("user_id")]


# Every status fixture whose value names the user in contacts[] with a user id; the group
# status is left out: its entry is a group participant with placeholder values, never the
# recipient of a message of ours (tested below).
STATUS_CONTACT_FIXTURES = [
    n
    for n in webhook_fixtures()
    if n.startswith("statuses/") and "group" not in n and contacts_entries(real(n))
]


def test_the_status_fixtures_with_user_ids_in_contacts_are_all_replayed() -> None:
    assert len(STATUS_CONTACT_FIXTURES) >= 10, STATUS_CONTACT_FIXTURES
    assert "statuses/meta_doc_2025_11_bsuid_delivered_with_phone" in STATUS_CONTACT_FIXTURES


def username_of(entry: dict[str, Any]) -> str | None:
    return str(entry["profile"]["username"]).lstrip("@") if "username" in entry["profile"] else None


@pytest.mark.parametrize("name", STATUS_CONTACT_FIXTURES)
def test_a_status_teaches_the_contact_its_ids_and_username_from_contacts(
    client: Client, number: PhoneNumber, name: str
) -> None:
    """Row: status value contacts[] (user_id, parent_user_id, profile.username).

    With a phone (wa_id) the contact is found by it and learns its user id; without one
    (a send to a user id, Meta's withheld-phone shapes) the entry is tied to its status and
    the contact, known by the id it was sent to, learns the parent id and username.
    """
    payload = real(name)
    [entry] = contacts_entries(payload)
    [status] = statuses_of(payload)
    status.pop("biz_opaque_callback_data", None)
    if entry.get("wa_id"):
        contact = make_contact(phone="+" + entry["wa_id"])
        assert "recipient_user_id" not in status or name.endswith(
            "2026_02_bsuid_delivered_with_phone"
        )
    else:
        contact = make_contact(user_id=entry["user_id"])
    make_message(phone_number=number, status="sending", wamid=status["id"], contact=contact, to="x")
    deliver(client, payload)
    contact.refresh_from_db()
    assert contact.user_id == entry["user_id"]
    assert contact.parent_user_id == entry.get("parent_user_id")
    assert contact.username == username_of(entry)


def test_a_status_without_a_phone_teaches_the_contact_of_its_message_by_wamid(
    client: Client, number: PhoneNumber
) -> None:
    """Row: status value contacts[] without wa_id, the status without recipient_user_id:
    the entry is tied to the value's only status, so to the message's contact."""
    payload = real("statuses/meta_doc_2026_02_bsuid_delivered_without_phone")
    [status] = statuses_of(payload)
    del status["recipient_user_id"]
    contact = make_contact(phone="+16505551234")
    make_message(phone_number=number, status="sent", wamid=status["id"], contact=contact, to="x")
    other = make_contact(phone="+16505551235")
    deliver(client, payload)
    contact.refresh_from_db()
    other.refresh_from_db()
    assert (contact.user_id, contact.parent_user_id, contact.username) == (
        "US.13491208655302741918",
        "US.11815799212886844830",
        "pablomorales",
    )
    assert other.user_id is None


def test_a_group_status_teaches_no_contact(client: Client, number: PhoneNumber) -> None:
    """Row: group status contacts[]: a participant, not our message's recipient."""
    payload = real("statuses/pywa_group_read_bsuid")
    [status] = statuses_of(payload)
    contact = make_contact(phone="+16505551234")
    make_message(phone_number=number, status="sent", wamid=status["id"], contact=contact, to="x")
    deliver(client, payload)
    contact.refresh_from_db()
    assert contact.user_id is None and contact.username is None


def test_contacts_never_replace_a_user_id_nor_take_one_from_its_holder(
    client: Client, number: PhoneNumber
) -> None:
    """Row: status value contacts[] naming an id another contact holds, or a contact that
    holds another id: nothing moves, and no parent id or username is taken for it."""
    payload = real("statuses/meta_doc_2025_11_bsuid_delivered_with_phone")
    [entry] = contacts_entries(payload)
    holder = make_contact(user_id=entry["user_id"])
    phone_only = make_contact(phone="+16505551234")
    deliver(client, payload)
    holder.refresh_from_db()
    phone_only.refresh_from_db()
    assert phone_only.user_id is None and phone_only.username is None
    assert holder.user_id == entry["user_id"]

    values(payload)[0]["contacts"][0]["user_id"] = "US.99"
    holder.delete()
    phone_only.user_id = "US.1"
    phone_only.save()
    payload["entry"][0]["changes"][0]["value"]["statuses"][0]["id"] = "wamid.other"
    deliver(client, payload)
    phone_only.refresh_from_db()
    assert (phone_only.user_id, phone_only.username) == ("US.1", None)


def test_a_later_username_replaces_the_earlier_one_and_a_missing_one_keeps_it(
    client: Client, number: PhoneNumber
) -> None:
    payload = real("statuses/meta_doc_2026_02_bsuid_delivered_with_phone")
    contact = make_contact(phone="+16505551234")
    deliver(client, payload)
    contact.refresh_from_db()
    assert contact.username == "pablomorales"
    entry = values(payload)[0]["contacts"][0]
    entry["profile"]["username"] = "pablo_m"
    statuses_of(payload)[0]["id"] = "wamid.second"
    deliver(client, payload)
    contact.refresh_from_db()
    assert contact.username == "pablo_m"
    del entry["profile"]["username"]
    statuses_of(payload)[0]["id"] = "wamid.third"
    deliver(client, payload)
    contact.refresh_from_db()
    assert contact.username == "pablo_m"


@pytest.mark.parametrize(
    "name", ["inbound/meta_doc_2026_02_bsuid_text_no_phone", "inbound/courier_text_bsuid_no_from"]
)
@pytest.mark.parametrize("only_contacts", [False, True], ids=["from_user_id", "contacts_only"])
def test_a_message_without_from_is_stored_and_its_stop_opts_the_contact_out(
    client: Client, number: PhoneNumber, name: str, only_contacts: bool
) -> None:
    """Row: messages[] with no from; the sender named by from_user_id, or (contacts_only)
    by the value's contacts[].user_id alone. Meta's page prints the entry's id as
    "uUS.1349…" beside from_user_id "US.1349…"; from_user_id wins when present."""
    payload = real(name)
    value = values(payload)[0]
    [message] = value["messages"]
    [entry] = value["contacts"]
    if only_contacts:
        del message["from_user_id"], message["from_parent_user_id"]
    user_id = entry["user_id"] if only_contacts else message["from_user_id"]
    contact = make_contact(user_id=user_id)
    pending = make_message(
        phone_number=number, status="pending", campaign=running_campaign(number), contact=contact
    )
    message["text"]["body"] = "STOP"
    deliver(client, payload)

    stored = InboundMessage.objects.get()
    assert (stored.wamid, stored.from_phone, stored.from_user_id) == (message["id"], "", user_id)
    assert stored.contact == contact and stored.is_opt_out
    assert stored.profile_name == entry["profile"]["name"]
    contact.refresh_from_db()
    assert contact.opted_out_at is not None
    assert contact.parent_user_id == entry["parent_user_id"]
    assert contact.username == entry["profile"]["username"].lstrip("@")
    pending.refresh_from_db()
    assert pending.status == "skipped"


def test_a_stop_by_user_id_finds_the_contact_another_message_of_the_batch_tied_it_to(
    client: Client, number: PhoneNumber
) -> None:
    """The senders are learnt before the messages are matched: a phone + user id message
    and a STOP naming only the user id, in one callback, opt the phone's contact out."""
    contact = make_contact(phone="+972987654321")
    payload = real("inbound/pywa_button_from_user_id_no_context")
    del values(payload)[0]["contacts"][0]["user_id"]  # tied by the message's own fields
    stop = real("inbound/courier_text_bsuid_no_from")
    stop_value = values(stop)[0]
    stop_value["messages"][0].update(from_user_id="US.13491208655302741918", id="wamid.stop")
    stop_value["messages"][0]["text"]["body"] = "STOP"
    stop_value["contacts"][0]["user_id"] = "US.13491208655302741918"
    payload["entry"][0]["changes"].append(stop["entry"][0]["changes"][0])
    deliver(client, payload)
    contact.refresh_from_db()
    assert contact.user_id == "US.13491208655302741918"
    assert contact.opted_out_at is not None
    assert InboundMessage.objects.get(wamid="wamid.stop").contact == contact


def test_a_message_without_from_or_any_user_id_is_dropped_as_malformed(
    client: Client, number: PhoneNumber
) -> None:
    payload = real("inbound/courier_text_bsuid_no_from")
    value = values(payload)[0]
    del value["messages"][0]["from_user_id"], value["contacts"][0]["user_id"]
    assert post(client, payload) == 200
    apply()
    assert not InboundMessage.objects.exists()
    assert WebhookEvent.objects.get().summary.get("malformed.message") == 1


def test_a_user_preferences_value_teaches_the_user_ids_its_contacts_name(
    client: Client, number: PhoneNumber
) -> None:
    """Row: user_preferences contacts[] (wa_id, user_id, parent_user_id)."""
    named = make_contact(phone="+972987654321")
    deliver(client, real("user_preferences/pywa_resume_contacts_bsuid"))
    named.refresh_from_db()
    assert named.user_id == "US.13491208655302741918"
    assert named.parent_user_id == "US.ENT.11815799212886844830"


def test_a_user_preferences_item_gives_its_parent_user_id(
    client: Client, number: PhoneNumber
) -> None:
    """Row: user_preferences[] wa_id + user_id + parent_user_id (Meta, 2026)."""
    contact = make_contact(phone="+16505551234")
    payload = real("user_preferences/meta_doc_resume")
    [item] = values(payload)[0]["user_preferences"]
    item.update(user_id="US.13491208655302741918", parent_user_id="US.ENT.1181579921")
    deliver(client, payload)
    contact.refresh_from_db()
    assert (contact.user_id, contact.parent_user_id) == (
        "US.13491208655302741918",
        "US.ENT.1181579921",
    )


def test_a_message_from_phone_and_user_id_ties_them_on_the_contact(
    client: Client, number: PhoneNumber
) -> None:
    """Row: messages[] from + from_user_id."""
    contact = make_contact(phone="+972987654321")
    deliver(client, real("inbound/pywa_button_from_user_id_no_context"))
    contact.refresh_from_db()
    assert contact.user_id == "US.13491208655302741918"
    assert contact.parent_user_id == "US.ENT.11815799212886844830"


# --- user_preferences --------------------------------------------------------------------


def test_a_user_preferences_stop_opts_out_and_skips_pending_rows(
    client: Client, number: PhoneNumber
) -> None:
    """Row: user_preferences value=stop."""
    contact = make_contact(phone="+16505551234")
    campaign = running_campaign(number)
    pending = make_message(
        phone_number=number, status="pending", campaign=campaign, contact=contact, to=contact.phone
    )
    deliver(client, real("user_preferences/piusalfred_stop_batched_with_messages"))
    contact.refresh_from_db()
    assert contact.opted_out_at is not None
    pending.refresh_from_db()
    assert pending.status == "skipped" and "user_preferences" in pending.skip_reason


def test_a_user_preferences_resume_opts_back_in(client: Client, number: PhoneNumber) -> None:
    """Row: user_preferences value=resume."""
    contact = make_contact(phone="+16505551234", opted_out_at=datetime(2024, 1, 1, tzinfo=UTC))
    deliver(client, real("user_preferences/meta_doc_resume"))
    contact.refresh_from_db()
    assert contact.opted_out_at is None
    assert contact.opted_in_at == datetime.fromtimestamp(1731705721, tz=UTC)


def test_a_resume_older_than_the_stop_does_not_undo_it(client: Client, number: PhoneNumber) -> None:
    """Row: user_preferences value=resume (late)."""
    stopped = datetime(2025, 6, 1, tzinfo=UTC)
    contact = make_contact(phone="+16505551234", opted_out_at=stopped)
    deliver(client, real("user_preferences/meta_doc_resume"))  # said in Nov 2024
    contact.refresh_from_db()
    assert contact.opted_out_at == stopped


def test_a_user_preferences_signup_changes_nothing(client: Client, number: PhoneNumber) -> None:
    """Row: user_preferences value=signup (ignored)."""
    contact = make_contact(phone="+16505551234")
    deliver(client, real("user_preferences/pywa_signup"))
    contact.refresh_from_db()
    assert contact.opted_out_at is None and contact.opted_in_at is None


# --- failed statuses ---------------------------------------------------------------------


def failed_with(code: int, title: str) -> dict[str, Any]:
    payload = real("statuses/check_api_failed_131050_production")
    error = values(payload)[0]["statuses"][0]["errors"][0]
    error.update(code=code, title=title, message=title)
    return payload


def failed_message(number: PhoneNumber, payload: dict[str, Any], **fields: Any) -> Message:
    status = values(payload)[0]["statuses"][0]
    status.pop("biz_opaque_callback_data", None)
    return make_message(phone_number=number, status="sent", wamid=status["id"], **fields)


def test_an_async_131050_opts_the_contact_out(client: Client, number: PhoneNumber) -> None:
    """Row: failed 131050."""
    contact = make_contact()
    campaign = running_campaign(number)
    payload = real("statuses/check_api_failed_131050_production")
    failed_message(number, payload, contact=contact, campaign=campaign, to=contact.phone)
    later = make_message(
        phone_number=number, status="pending", campaign=campaign, contact=contact, to="+1"
    )
    deliver(client, payload)
    contact.refresh_from_db()
    assert contact.opted_out_at is not None
    later.refresh_from_db()
    assert later.status == "skipped"
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING


@pytest.mark.parametrize(("code", "status"), [(132015, "PAUSED"), (132016, "DISABLED")])
def test_an_async_template_error_pauses_the_template_and_its_campaigns(
    client: Client, number: PhoneNumber, code: int, status: str
) -> None:
    """Rows: failed 132015, failed 132016."""
    campaign = running_campaign(number)
    other = running_campaign(number)
    payload = failed_with(code, "Template paused")
    failed_message(number, payload, campaign=campaign, template=campaign.template)
    deliver(client, payload)
    campaign.refresh_from_db()
    other.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED and str(code) in campaign.status_reason
    assert other.status == CampaignStatus.RUNNING
    assert Template.objects.get(pk=campaign.template_id).status == status


@pytest.mark.parametrize("code", [131031, 368, 131042])
def test_an_async_account_error_pauses_every_campaign_of_the_account(
    client: Client, number: PhoneNumber, code: int
) -> None:
    """Rows: failed 131031, 368, 131042."""
    first, second = running_campaign(number), running_campaign(number)
    payload = failed_with(code, "Account problem")
    failed_message(number, payload, campaign=first)
    deliver(client, payload)
    for campaign in (first, second):
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.PAUSED
        assert f"Meta error {code}" in campaign.status_reason


def test_an_async_131030_pauses_the_campaign(client: Client, number: PhoneNumber) -> None:
    """Row: failed 131030."""
    campaign = running_campaign(number)
    payload = failed_with(131030, "Recipient phone number not in allowed list")
    failed_message(number, payload, campaign=campaign)
    deliver(client, payload)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED and "131030" in campaign.status_reason


@pytest.mark.parametrize(("code", "spam"), [(130429, False), (131048, True)])
def test_an_async_throttle_slows_the_number(
    client: Client, number: PhoneNumber, code: int, spam: bool
) -> None:
    """Rows: failed 130429, failed 131048."""
    payload = failed_with(code, "Rate limit hit")
    failed_message(number, payload)
    deliver(client, payload)
    number.refresh_from_db()
    assert number.effective_rate is not None
    expected = 80 * 1.0 * (0.5 if spam else 0.8)
    assert number.effective_rate == pytest.approx(expected, rel=0.15)


def test_a_value_level_130429_slows_the_number(client: Client, number: PhoneNumber) -> None:
    """Row: errors[] 130429."""
    deliver(client, real("errors_async/meta_doc_value_errors_130429"))
    number.refresh_from_db()
    assert number.effective_rate is not None and number.effective_rate < 80


@pytest.mark.parametrize("code", [131031, 368, 131042])
def test_a_value_level_account_error_pauses_the_account(
    client: Client, number: PhoneNumber, code: int
) -> None:
    """Row: errors[] 131031 / 368 / 131042 (the 130429 example, code changed)."""
    campaign = running_campaign(number)
    payload = real("errors_async/meta_doc_value_errors_130429")
    values(payload)[0]["errors"][0]["code"] = code
    deliver(client, payload)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED and str(code) in campaign.status_reason


def test_a_value_level_error_of_another_code_is_recorded_only(
    client: Client, number: PhoneNumber
) -> None:
    """Row: errors[] other codes."""
    campaign = running_campaign(number)
    deliver(client, real("errors_async/courier_value_errors_code0_title_only"))
    number.refresh_from_db()
    campaign.refresh_from_db()
    assert number.effective_rate is None and campaign.status == CampaignStatus.RUNNING


def test_an_async_131026_fails_the_message_only(client: Client, number: PhoneNumber) -> None:
    """Row: failed 131026 (and other per-recipient codes)."""
    contact = make_contact()
    campaign = running_campaign(number)
    payload = real("statuses/check_api_failed_131026_minimal")
    message = failed_message(number, payload, contact=contact, campaign=campaign)
    deliver(client, payload)
    message.refresh_from_db()
    contact.refresh_from_db()
    campaign.refresh_from_db()
    assert message.status == "failed" and message.last_error_code == 131026
    assert contact.opted_out_at is None and campaign.status == CampaignStatus.RUNNING


def test_a_redelivered_failure_does_not_pause_a_resumed_campaign(
    client: Client, number: PhoneNumber
) -> None:
    """Effects apply once: the operator's resume stands when Meta repeats itself."""
    campaign = running_campaign(number)
    payload = failed_with(132015, "Template paused")
    failed_message(number, payload, campaign=campaign, template=campaign.template)
    deliver(client, payload)
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.RUNNING)
    values(payload)[0]["statuses"][0]["timestamp"] = "1700000000"  # a new body, same news
    deliver(client, payload)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING


def test_per_message_pricing_is_recorded(client: Client, number: PhoneNumber) -> None:
    """Row: statuses[] pricing (PMP)."""
    payload = real("statuses/meta_doc_sent_pmp_regular_with_conversation")
    status = values(payload)[0]["statuses"][0]
    message = make_message(phone_number=number, status="sending", wamid=status["id"])
    deliver(client, payload)
    message.refresh_from_db()
    assert (message.pricing_model, message.pricing_type, message.pricing_category) == (
        "PMP",
        "regular",
        "marketing",
    )


# --- templates ---------------------------------------------------------------------------


def template_named(number: PhoneNumber, name: str, language: str, **fields: Any) -> Template:
    return make_template(account=number.account, name=name, language=language, **fields)


def test_a_recategorisation_to_marketing_updates_and_pauses(
    client: Client, number: PhoneNumber
) -> None:
    """Row: template_category_update new_category."""
    template = template_named(number, "welcome_template", "en_US", category="UTILITY")
    campaign = running_campaign(number, template=template)
    deliver(client, real("templates/meta_doc_category_recategorized"))
    template.refresh_from_db()
    campaign.refresh_from_db()
    assert (template.category, template.previous_category) == ("MARKETING", "UTILITY")
    assert campaign.status == CampaignStatus.PAUSED and "recategorised" in campaign.status_reason


def test_an_announced_recategorisation_changes_nothing_yet(
    client: Client, number: PhoneNumber
) -> None:
    """Row: template_category_update correct_category (announced)."""
    template = template_named(number, "welcome_template", "en_US", category="UTILITY")
    campaign = running_campaign(number, template=template)
    deliver(client, real("templates/meta_doc_category_pending_recategorization"))
    template.refresh_from_db()
    campaign.refresh_from_db()
    assert template.category == "UTILITY" and campaign.status == CampaignStatus.RUNNING


@pytest.mark.parametrize(
    "name", ["templates/meta_doc_quality_green_to_yellow", "templates/pywa_quality_green_to_yellow"]
)
def test_a_template_quality_change_is_recorded(
    client: Client, number: PhoneNumber, name: str
) -> None:
    """Row: message_template_quality_update (YELLOW)."""
    template = template_named(number, "welcome_template", "en_US")
    campaign = running_campaign(number, template=template)
    deliver(client, real(name))
    template.refresh_from_db()
    campaign.refresh_from_db()
    assert template.quality_score == "YELLOW" and campaign.status == CampaignStatus.RUNNING


def test_a_red_template_quality_pauses_its_campaigns(client: Client, number: PhoneNumber) -> None:
    """Row: message_template_quality_update (RED)."""
    template = template_named(number, "welcome_template", "en_US")
    campaign = running_campaign(number, template=template)
    payload = real("templates/pywa_quality_green_to_yellow")
    values(payload)[0]["new_quality_score"] = "RED"
    deliver(client, payload)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED and "RED" in campaign.status_reason


def test_new_placeholders_pause_the_campaigns_of_the_template(
    client: Client, number: PhoneNumber
) -> None:
    """Row: message_template_components_update."""
    template = template_named(number, "order_confirmation", "en_US", body_text="Thanks {{1}}!")
    campaign = running_campaign(number, template=template)
    deliver(client, real("templates/meta_doc_components_update"))
    template.refresh_from_db()
    campaign.refresh_from_db()
    assert template.body_text.startswith("Thank you for your order, {{1}}!")
    assert campaign.status == CampaignStatus.PAUSED and "placeholders" in campaign.status_reason


def test_new_wording_with_the_same_placeholders_is_recorded_only(
    client: Client, number: PhoneNumber
) -> None:
    """Row: message_template_components_update (same placeholders)."""
    template = template_named(number, "my_message_template", "he", body_text="Hello {{1}}")
    campaign = running_campaign(number, template=template)
    deliver(client, real("templates/pywa_components_update_element_only"))
    template.refresh_from_db()
    campaign.refresh_from_db()
    assert template.body_text == "Hi {{1}}! Welcome to our service."
    assert campaign.status == CampaignStatus.RUNNING


def test_a_rejection_records_its_reason(client: Client, number: PhoneNumber) -> None:
    """Row: message_template_status_update REJECTED."""
    template = template_named(number, "schedule_confirmation4", "pt_BR")
    deliver(client, real("templates/bindambc_status_rejected_scam"))
    template.refresh_from_db()
    assert template.status == "REJECTED" and template.rejected_reason == "SCAM"


# --- changed numbers ---------------------------------------------------------------------


def test_a_changed_number_moves_the_contact_with_its_history_and_opt_out(
    client: Client, number: PhoneNumber
) -> None:
    """Row: messages[] system user_changed_number."""
    out_at = timezone.now()
    contact = make_contact(phone="+16505551234", opted_out_at=out_at)
    old = make_message(phone_number=number, status="delivered", contact=contact, to=contact.phone)
    deliver(client, real("inbound/meta_doc_system_user_changed_number"))
    contact.refresh_from_db()
    assert contact.phone == "+12195555358" and contact.opted_out_at == out_at
    assert Message.objects.get(pk=old.pk).contact_id == contact.pk
    assert not Contact.objects.filter(phone="+16505551234").exists()


def test_a_changed_number_onto_an_existing_contact_carries_the_opt_out(
    client: Client, number: PhoneNumber
) -> None:
    """Row: messages[] system user_changed_number (new number already a contact)."""
    out_at = timezone.now()
    make_contact(phone="+16505551234", opted_out_at=out_at)
    newer = make_contact(phone="+12195555358")
    deliver(client, real("inbound/meta_doc_system_user_changed_number"))
    newer.refresh_from_db()
    assert newer.opted_out_at == out_at


OLD_ID, NEW_ID = "US.13491208655302741918", "US.20202020202020202020"


def user_id_changed(*, sender: bool) -> dict[str, Any]:
    """Meta's user_changed_number capture turned into a user_changed_user_id (no published
    example exists; the shape is Meta's, see the README): the system object names the new
    user id, its body the old one, and the sender carries the old one unless ``sender`` is
    false (some payloads name the user only in the body)."""
    payload = real("inbound/meta_doc_system_user_changed_number")
    message = values(payload)[0]["messages"][0]
    del message["from"]
    if sender:
        message["from_user_id"] = OLD_ID
    message["system"] = {
        "body": f"User Sheena Nelson changed from {OLD_ID} to {NEW_ID}",
        "user_id": NEW_ID,
        "type": "user_changed_user_id",
    }
    return payload


@pytest.mark.parametrize("sender", [True, False], ids=["from_user_id", "body_only"])
def test_a_changed_user_id_moves_the_contact_with_its_history_and_opt_out(
    client: Client, number: PhoneNumber, sender: bool
) -> None:
    """Row: messages[] system user_changed_user_id."""
    out_at = timezone.now()
    contact = Contact.objects.create(user_id=OLD_ID, opted_out_at=out_at)
    old = make_message(phone_number=number, status="delivered", contact=contact, to=OLD_ID)
    deliver(client, user_id_changed(sender=sender))
    contact.refresh_from_db()
    assert contact.user_id == NEW_ID and contact.opted_out_at == out_at
    assert Message.objects.get(pk=old.pk).contact_id == contact.pk
    # The old id stays on the stored system message (the history of who said what).
    assert InboundMessage.objects.get().from_user_id == OLD_ID
    assert not Contact.objects.filter(user_id=OLD_ID).exists()


def test_a_changed_user_id_records_the_parent_user_id_it_names(
    client: Client, number: PhoneNumber
) -> None:
    """Row: messages[] system user_changed_user_id with system.parent_user_id."""
    contact = Contact.objects.create(user_id=OLD_ID, parent_user_id="US.ENT.1")
    payload = user_id_changed(sender=True)
    values(payload)[0]["messages"][0]["system"]["parent_user_id"] = "US.ENT.2"
    deliver(client, payload)
    contact.refresh_from_db()
    assert (contact.user_id, contact.parent_user_id) == (NEW_ID, "US.ENT.2")


def test_a_changed_user_id_onto_an_existing_contact_carries_the_opt_out(
    client: Client, number: PhoneNumber
) -> None:
    """Row: messages[] system user_changed_user_id (new id already a contact's)."""
    out_at = timezone.now()
    Contact.objects.create(user_id=OLD_ID, opted_out_at=out_at)
    newer = Contact.objects.create(phone="+12195555358", user_id=NEW_ID)
    deliver(client, user_id_changed(sender=True))
    newer.refresh_from_db()
    assert newer.opted_out_at == out_at


# --- account_update ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "account/meta_doc_account_update_account_deleted",
        "account/meta_doc_account_update_offboarded",
    ],
)
def test_a_deleted_or_offboarded_account_pauses_its_campaigns(
    client: Client, number: PhoneNumber, name: str
) -> None:
    """Rows: account_update ACCOUNT_DELETED, ACCOUNT_OFFBOARDED."""
    campaign = running_campaign(number)
    deliver(client, real(name))
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED


def test_a_restriction_of_user_initiated_messaging_does_not_pause(
    client: Client, number: PhoneNumber
) -> None:
    """Row: account_update ACCOUNT_RESTRICTION RESTRICTED_CUSTOMER_INITIATED_MESSAGING."""
    campaign = running_campaign(number)
    payload = real("account/pywa_account_update_restriction_biz_initiated")
    restrictions = values(payload)[0]["restriction_info"]
    restrictions[0]["restriction_type"] = "RESTRICTED_CUSTOMER_INITIATED_MESSAGING"
    deliver(client, payload)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING


def test_a_restriction_of_business_initiated_messaging_pauses(
    client: Client, number: PhoneNumber
) -> None:
    """Row: account_update ACCOUNT_RESTRICTION RESTRICTED_BIZ_INITIATED_MESSAGING."""
    campaign = running_campaign(number)
    deliver(client, real("account/pywa_account_update_restriction_biz_initiated"))
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED


def test_the_parser_reads_bsuid_senders_of_every_shape() -> None:
    shapes = {
        "inbound/courier_text_bsuid_no_from": ("", "US.1234"),
        "inbound/courier_text_bsuid_in_from_field": ("", "US.1234"),
        "inbound/meta_doc_2025_11_bsuid_text_empty_from": ("", "user.93737..."),
        # No from_user_id: the sender's contacts[] entry (same wa_id) gives the user id.
        "inbound/pywa_text_contacts_bsuid": ("+972987654321", "US.13491208655302741918"),
        "inbound/meta_doc_2026_02_bsuid_text_no_phone": ("", "US.13491208655302741918"),
        "inbound/pywa_button_from_user_id_no_context": None,
    }
    for name, expected in shapes.items():
        parsed = body_parse(copy.deepcopy(real(name)))
        assert len(parsed.inbound) == 1, name
        if expected is not None:
            inbound = parsed.inbound[0]
            assert (inbound.from_phone, inbound.from_user_id) == expected, name
