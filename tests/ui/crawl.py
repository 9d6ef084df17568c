"""A populated installation and a crawler that opens every admin page a user can reach.

``world_populate`` leaves one of everything the admin shows (an account, a number with a
known token, a template, a list with contacts, a finished campaign with sent, failed and
dead messages, a transactional send, webhook events, replies, unmatched statuses, async
errors, an API key, an upload, a live journey with a person in it and a test contact, a
recurring campaign). ``admin_crawl`` then follows every link under ``/admin/``
from the index, breadth first, as the given client, and returns what each page answered.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.test import Client
from django.utils import timezone

from campaigns.models import ContactUpload, ContactUploadStatus
from delivery.api.keys import api_key_create
from delivery.models import Message, MessageKind
from journeys.events_in import events_record
from journeys.routing import events_route
from journeys.versions import journey_create, journey_go_live
from tests.factories import (
    make_account,
    make_campaign,
    make_contact,
    make_contact_list,
    make_message,
    make_phone_number,
    make_template,
)
from tests.ui.support import dead_message
from webhooks.models import AsyncError, InboundMessage, UnmatchedStatus, WebhookEvent

HREF = re.compile(r'href="(/admin/[^"#]*)"')
# Links that end the session or only change the page's sort or filter: a few of each
# path are enough to render its every template.
SKIP = ("/admin/logout/",)
QUERY_VARIANTS_PER_PATH = 2


@dataclass
class World:
    token: str
    ids: dict[str, int] = field(default_factory=dict)


def world_populate(*, token: str) -> World:
    world = World(token=token)
    account = make_account(waba_id="102290129340398", name="Acme portfolio")
    number = make_phone_number(
        account=account,
        access_token=token,
        phone_number_id="106540352242922",
        display_phone_number="+15550783881",
    )
    template = make_template(account=account, name="spring_sale", body_text="Hi {{1}}")
    customers = make_contact_list(name="Customers")
    contacts = [
        make_contact(phone=f"+55119999900{i:02d}", name=f"Client {i}", contact_list=customers)
        for i in range(4)
    ]
    campaign = make_campaign(
        phone_number=number,
        template=template,
        lists=[customers],
        name="Spring sale",
        status="completed",
        started_at=timezone.now() - timedelta(minutes=5),
        completed_at=timezone.now(),
    )
    now = timezone.now()
    make_message(
        campaign=campaign, to=contacts[0].phone, contact=contacts[0], status="read",
        wamid="wamid.crawl-1", sent_at=now, delivered_at=now, read_at=now,
    )  # fmt: skip
    make_message(
        campaign=campaign, to=contacts[1].phone, contact=contacts[1], status="failed",
        last_error_code=131026, last_error_title="Message undeliverable", failed_at=now,
    )  # fmt: skip
    letter = dead_message(campaign, to=contacts[2].phone, contact=contacts[2])
    key, _raw = api_key_create(name="Shop backend", all_numbers=True)
    transactional = Message.objects.create(
        kind=MessageKind.TRANSACTIONAL, phone_number=number, template=template, to="+5511988887777",
        params={"body": ["4711"]}, status="sent", next_attempt_at=now, api_key=key,
        idempotency_key="order-4711",
    )  # fmt: skip
    event = WebhookEvent.objects.create(
        body=b'{"object":"whatsapp_business_account","entry":[]}',
        body_sha256="0" * 64, status="processed",
    )  # fmt: skip
    InboundMessage.objects.create(
        wamid="wamid.inbound-1", from_phone=contacts[0].phone, type="text", text="STOP",
        sent_at=now, phone_number=number, contact=contacts[0], campaign=campaign,
        is_opt_out=True, payload={"id": "wamid.inbound-1"},
    )  # fmt: skip
    UnmatchedStatus.objects.create(
        wamid="wamid.unknown", status="delivered", phone_number_id=number.phone_number_id,
        payload={"id": "wamid.unknown"}, event=event, first_seen_at=now, next_try_at=now,
    )  # fmt: skip
    AsyncError.objects.create(
        event=event, phone_number_id=number.phone_number_id, code=130429,
        title="Rate limit hit", payload={"code": 130429},
    )  # fmt: skip
    upload = ContactUpload.objects.create(
        contact_list=customers, original_name="clients.csv", stored_name="u1.csv",
        status=ContactUploadStatus.DONE, result={"created": 4, "rejected": 0},
    )  # fmt: skip
    journey = journey_go_live(
        journey=journey_create(
            name="Welcome",
            phone_number=number,
            definition={
                "entry": {"type": "event", "event": "signed_up"},
                "steps": [
                    {"id": "wait", "type": "wait", "delay": {"hours": 1}},
                    {
                        "id": "hello",
                        "type": "send",
                        "template": "spring_sale",
                        "mapping": {"body": {"1": {"field": "name"}}},
                    },
                ],
            },
        )
    )
    journey.test_contacts.add(contacts[3])
    events_record(
        api_key_id=None,
        items=[{"phone": contacts[0].phone, "name": "signed_up"}],
        idempotency_key=None,
    )
    events_route()
    weekly = make_campaign(
        phone_number=number, template=template, lists=[customers], name="Weekly", status="draft"
    )
    recurring = journey_create(
        name="Weekly, on Mondays",
        phone_number=number,
        definition={
            "entry": {
                "type": "schedule",
                "campaign": weekly.pk,
                "every": "week",
                "weekdays": ["mon"],
                "at": "10:00",
                "zone": "America/Sao_Paulo",
            },
        },
    )
    world.ids = {
        "account": account.pk,
        "number": number.pk,
        "template": template.pk,
        "list": customers.pk,
        "campaign": campaign.pk,
        "dead_letter": letter.pk,
        "transactional": transactional.pk,
        "event": event.pk,
        "api_key": key.pk,
        "upload": upload.pk,
        "journey": journey.pk,
        "recurring": recurring.pk,
    }
    return world


@dataclass(frozen=True)
class Page:
    url: str
    status: int
    body: str


def admin_crawl(client: Client, *, start: str = "/admin/", limit: int = 600) -> dict[str, Page]:
    """Every ``/admin/`` page reachable from ``start`` by GET links, with its answer."""
    seen: set[str] = {start}
    per_path: Counter[str] = Counter()
    queue: deque[str] = deque([start])
    pages: dict[str, Page] = {}
    while queue and len(pages) < limit:
        url = queue.popleft()
        response = client.get(url)
        body = _body(response)
        pages[url] = Page(url, response.status_code, body)
        if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
            continue
        for link in HREF.findall(body):
            link = link.replace("&amp;", "&")
            if link in seen or link.startswith(SKIP):
                continue
            path = urlsplit(link).path
            if urlsplit(link).query:
                per_path[path] += 1
                if per_path[path] > QUERY_VARIANTS_PER_PATH:
                    continue
            seen.add(link)
            queue.append(link)
    return pages


def _body(response: Any) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")
