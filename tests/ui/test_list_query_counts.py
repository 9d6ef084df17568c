"""Every admin list page renders in a fixed number of queries with 10,000 rows present.

For each registered model: 10,000 rows (bulk inserts, related rows spread over a few
hundred parents as in real use), then its list page, the page filtered, searched, and
(where it has them) the date drill-down, each within ``MAX_QUERIES``. A list column that
reaches a related row without ``list_select_related`` costs a query per row (50 on a page)
and fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from campaigns.models import (
    BusinessAccount,
    Campaign,
    Contact,
    ContactList,
    ContactUpload,
    ListMembership,
    PhoneNumber,
    Segment,
    Template,
)
from delivery.models import ApiKey, DeadLetter, EventSubscription, Message, SupportAction
from tests.ui.support import role_user
from webhooks.models import AsyncError, InboundMessage, UnmatchedStatus, WebhookEvent
from whatsblast.auth.roles import MARKETING, SUPPORT

pytestmark = pytest.mark.django_db

ROWS = 10_000
PARENTS = 200
MAX_QUERIES = 15
BATCH = 2_000


def _bulk(model: type, rows: Any) -> list[Any]:
    return model.objects.bulk_create(rows, batch_size=BATCH)  # type: ignore[attr-defined]


def _accounts(n: int = PARENTS) -> list[BusinessAccount]:
    return _bulk(
        BusinessAccount, (BusinessAccount(waba_id=f"waba-{i}", name=f"A{i}") for i in range(n))
    )


def _numbers(n: int = PARENTS) -> list[PhoneNumber]:
    accounts = _accounts(min(n, PARENTS))
    return _bulk(
        PhoneNumber,
        (
            PhoneNumber(
                phone_number_id=f"pn-{i}",
                display_phone_number=f"+1555{i:07d}",
                account=accounts[i % len(accounts)],
                access_token="secret",
            )
            for i in range(n)
        ),
    )


def _templates(n: int = PARENTS) -> list[Template]:
    accounts = _accounts()
    return _bulk(
        Template,
        (
            Template(account=accounts[i % PARENTS], name=f"t{i}", language="en_US", body_text="Hi")
            for i in range(n)
        ),
    )


def _campaigns(n: int = PARENTS) -> list[Campaign]:
    numbers = _numbers()
    template = Template.objects.create(account=numbers[0].account, name="promo", language="en")
    return _bulk(
        Campaign,
        (
            Campaign(name=f"c{i}", phone_number=numbers[i % PARENTS], template=template)
            for i in range(n)
        ),
    )


def _contacts(n: int = ROWS) -> list[Contact]:
    return _bulk(Contact, (Contact(phone=f"+55119{i:08d}", name=f"N{i}") for i in range(n)))


def _messages(n: int = ROWS) -> list[Message]:
    campaigns = _campaigns()
    now = timezone.now()
    return _bulk(
        Message,
        (
            Message(
                campaign=campaigns[i % PARENTS],
                phone_number_id=campaigns[i % PARENTS].phone_number_id,
                template_id=campaigns[i % PARENTS].template_id,
                to=f"+55119{i:08d}",
                status="dead",
                next_attempt_at=now,
            )
            for i in range(n)
        ),
    )


def build_deadletters() -> None:
    now = timezone.now()
    letters = _bulk(
        DeadLetter,
        (
            DeadLetter(
                message=m,
                campaign_id=m.campaign_id,
                phone_number_id=m.phone_number_id,
                error_code=(131000, 131026, 131049, 470)[i % 4],
                error_title="Some error",
            )
            for i, m in enumerate(_messages())
        ),
    )
    # created_at is auto_now_add: spread it afterwards, so the date drill-down has years.
    for i, letter in enumerate(letters[:1000]):
        letter.created_at = now - timedelta(days=i)
    DeadLetter.objects.bulk_update(letters[:1000], ["created_at"], batch_size=BATCH)
    _bulk(
        SupportAction,
        (SupportAction(dead_letter=d, action="discarded", username="sam") for d in letters[:500]),
    )


def build_contactlists() -> None:
    lists = _bulk(ContactList, (ContactList(name=f"list-{i}") for i in range(ROWS)))
    contacts = _contacts(PARENTS)
    _bulk(
        ListMembership,
        (ListMembership(contact_list=lists[i], contact=contacts[i % PARENTS]) for i in range(ROWS)),
    )


def build_contactuploads() -> None:
    lists = _bulk(ContactList, (ContactList(name=f"list-{i}") for i in range(PARENTS)))
    user = get_user_model().objects.create_user("uploader")
    _bulk(
        ContactUpload,
        (
            ContactUpload(
                contact_list=lists[i % PARENTS],
                original_name=f"f{i}.csv",
                stored_name=f"{i}.csv",
                status="done",
                result={"imported": i, "merged": 0, "rejected": 1},
                created_by=user,
            )
            for i in range(ROWS)
        ),
    )


def build_apikeys() -> None:
    _bulk(
        ApiKey,
        (ApiKey(name=f"k{i}", prefix=f"{i:010x}", key_sha256="0" * 64) for i in range(ROWS)),
    )


def build_event_subscriptions() -> None:
    _bulk(
        EventSubscription,
        (
            EventSubscription(name=f"s{i}", url=f"https://hooks.example/{i}", secret="whsec_x")
            for i in range(ROWS)
        ),
    )


def build_webhookevents() -> None:
    _bulk(
        WebhookEvent,
        (
            WebhookEvent(body=b"{}", body_sha256=f"{i:064x}", status="processed")
            for i in range(ROWS)
        ),
    )


def build_unmatchedstatuses() -> None:
    now = timezone.now()
    _bulk(
        UnmatchedStatus,
        (
            UnmatchedStatus(
                wamid=f"wamid.{i}", status="sent", payload={}, first_seen_at=now, next_try_at=now
            )
            for i in range(ROWS)
        ),
    )


def build_inboundmessages() -> None:
    campaigns = _campaigns()
    now = timezone.now()
    _bulk(
        InboundMessage,
        (
            InboundMessage(
                wamid=f"wamid.in.{i}",
                from_phone=f"+55119{i:08d}",
                type="text",
                text="hi",
                sent_at=now,
                campaign=campaigns[i % PARENTS],
                payload={},
            )
            for i in range(ROWS)
        ),
    )


def build_asyncerrors() -> None:
    _bulk(AsyncError, (AsyncError(code=131000, title="x", payload={}) for i in range(ROWS)))


def build_marketing_clicks() -> None:
    from webhooks.models import MarketingClick

    _bulk(
        MarketingClick,
        (
            MarketingClick(
                action_type="marketing_messages_link_click", tracking_token=f"t{i}", payload={}
            )
            for i in range(ROWS)
        ),
    )


def build_conversions() -> None:
    """Conversions attributed to messages of many campaigns, to contacts, and unmatched."""
    from decimal import Decimal

    from delivery.models import Conversion

    messages = _messages(ROWS)
    contacts = _contacts(PARENTS)
    now = timezone.now()
    _bulk(
        Conversion,
        (
            Conversion(
                contact=contacts[i % PARENTS] if i % 10 else None,
                phone=f"+55119{i:08d}",
                event=("purchase", "signup")[i % 2],
                value=Decimal(i % 100),
                currency="BRL",
                occurred_at=now,
                source=("api", "upload")[i % 2],
                dedupe_key=f"bench:{i}",
                message=messages[i],
                campaign_id=messages[i].campaign_id,
                attributed_by="delivered",
            )
            for i in range(ROWS)
        ),
    )


def build_users() -> None:
    user_model = get_user_model()
    _bulk(user_model, (user_model(username=f"u{i}", password="!") for i in range(ROWS)))


def build_ratecards() -> None:
    from decimal import Decimal

    from campaigns.models import RateCard

    _bulk(
        RateCard,
        (
            RateCard(country_prefix=f"+{i + 1}", category="marketing", price=Decimal("0.01"))
            for i in range(ROWS)
        ),
    )


def build_segments() -> None:
    _bulk(
        Segment,
        (Segment(name=f"segment {i}", rules={"list": f"list {i}"}) for i in range(ROWS)),
    )


def _journeys(n: int = PARENTS) -> list[Any]:
    """Journeys of every entry (an event, a segment, a schedule), each with its version."""
    from journeys.models import Journey, JourneyVersion

    numbers = _numbers(20)
    segment = Segment.objects.create(name="VIP", rules={"list": "vip"})
    template = Template.objects.create(account=numbers[0].account, name="promo", language="en")
    campaign = Campaign.objects.create(name="weekly", phone_number=numbers[0], template=template)
    entries = [
        {"type": "event", "event": "cart_updated"},
        {"type": "segment", "segment": segment.pk},
        {"type": "schedule", "campaign": campaign.pk, "every": "day", "at": "10:00", "zone": "UTC"},
    ]
    journeys = _bulk(
        Journey,
        (
            Journey(
                name=f"journey {i}", phone_number=numbers[i % 20], status=("draft", "live")[i % 2]
            )
            for i in range(n)
        ),
    )
    step = [{"id": "wait", "type": "wait", "delay": {"hours": 1}}]
    _bulk(
        JourneyVersion,
        (
            JourneyVersion(
                journey=j,
                number=1,
                definition={"entry": entries[i % 3], **({} if i % 3 == 2 else {"steps": step})},
            )
            for i, j in enumerate(journeys)
        ),
    )
    return journeys


def build_journeyinstances() -> None:
    from journeys.models import JourneyInstance

    journeys = _journeys()
    contacts = _contacts(PARENTS)
    now = timezone.now()
    _bulk(
        JourneyInstance,
        (
            JourneyInstance(
                journey=journeys[i % PARENTS],
                contact=contacts[i % PARENTS],
                key=str(i),
                version=1,
                step="wait",
                state=("active", "exited")[i % 2],
                entered_at=now,
                due_at=now,
            )
            for i in range(ROWS)
        ),
    )


def build_groups() -> None:
    _bulk(Group, (Group(name=f"g{i}") for i in range(ROWS)))


BUILDERS: dict[str, Callable[[], Any]] = {
    "campaigns.businessaccount": lambda: _accounts(ROWS),
    "campaigns.phonenumber": lambda: _numbers(ROWS),
    "campaigns.template": lambda: _templates(ROWS),
    "campaigns.campaign": lambda: _campaigns(ROWS),
    "campaigns.contactlist": build_contactlists,
    "campaigns.contact": lambda: _contacts(ROWS),
    "campaigns.contactupload": build_contactuploads,
    "campaigns.ratecard": build_ratecards,
    "campaigns.segment": build_segments,
    "delivery.message": lambda: _messages(ROWS),
    "delivery.deadletter": build_deadletters,
    "delivery.apikey": build_apikeys,
    "delivery.eventsubscription": build_event_subscriptions,
    "delivery.conversion": build_conversions,
    "webhooks.webhookevent": build_webhookevents,
    "webhooks.unmatchedstatus": build_unmatchedstatuses,
    "webhooks.inboundmessage": build_inboundmessages,
    "webhooks.asyncerror": build_asyncerrors,
    "webhooks.marketingclick": build_marketing_clicks,
    "journeys.journey": lambda: _journeys(ROWS),
    "journeys.journeyinstance": build_journeyinstances,
    "auth.user": build_users,
    "auth.group": build_groups,
    # The queue dashboard has no table: its page lists the queues.
    "django_rq.dashboard": lambda: None,
}


def _label(model: type) -> str:
    return f"{model._meta.app_label}.{model._meta.model_name}"


def test_every_registered_model_has_a_builder() -> None:
    assert {_label(m) for m in admin.site._registry} == set(BUILDERS)


def _variants(model_admin: Any) -> list[dict[str, str]]:
    """The plain list, then one filtered, one searched and one drilled-down page."""
    variants: list[dict[str, str]] = [{}]
    if model_admin.search_fields:
        variants.append({"q": "+5511900000001"})
    if model_admin.date_hierarchy:
        variants.append({f"{model_admin.date_hierarchy}__year": str(timezone.now().year)})
    return variants


@pytest.mark.parametrize("label", sorted(BUILDERS))
def test_a_list_page_costs_a_fixed_number_of_queries_with_10k_rows(
    label: str, admin_client: Client, django_assert_max_num_queries: Any
) -> None:
    model = next(m for m in admin.site._registry if _label(m) == label)
    BUILDERS[label]()
    if model._meta.managed:
        assert model._default_manager.count() >= ROWS
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    admin_client.get(url)  # warm: content types, sessions

    for params in _variants(admin.site._registry[model]):
        with django_assert_max_num_queries(MAX_QUERIES):
            response = admin_client.get(url, params)
        assert response.status_code == 200, (label, params)


@pytest.mark.parametrize(
    ("role", "label", "builder"),
    [
        (SUPPORT, "delivery.deadletter", build_deadletters),
        (SUPPORT, "delivery.message", lambda: _messages(ROWS)),
        (MARKETING, "campaigns.contactupload", build_contactuploads),
        (MARKETING, "campaigns.contact", lambda: _contacts(ROWS)),
        (MARKETING, "journeys.journey", lambda: _journeys(ROWS)),
        (SUPPORT, "journeys.journeyinstance", build_journeyinstances),
    ],
)
def test_a_role_users_list_pages_cost_the_same(
    role: str, label: str, builder: Callable[[], Any], django_assert_max_num_queries: Any
) -> None:
    builder()
    client = Client()
    client.force_login(role_user(role))
    app_label, model_name = label.split(".")
    url = reverse(f"admin:{app_label}_{model_name}_changelist")
    client.get(url)
    with django_assert_max_num_queries(MAX_QUERIES):
        assert client.get(url).status_code == 200
