"""Must show: a campaign created, checked, launched and followed through the API alone, run
to completion on the simulator (sends, then signed status callbacks and replies posted to
the live server), and everything the API says about it is what the database holds.

Twenty people on the list ``spring``; the simulator fails three of them by status
callback (131026), and two of the others reply: one "Thanks!", one "STOP" (an opt-out). So,
by hand: 20 recipients, 17 sent (delivered or read), 3 failed; 2 replied, 1 opted out; the
report's delivered rate is delivered / sent, its failed rate 3 / 20; results.csv has 20
rows, one per recipient, each with its message's status.

Then the transitions on the same number: a campaign launched and paused before any worker
ran sends nothing until resumed, then completes; a launched campaign cancelled before its
sends cancels every message and sends none; each transition that no longer applies is a
409 naming the status. And an idempotent replay of ``POST /campaigns`` creates one campaign.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from typing import Any

import pytest
import requests
from django.http import HttpResponse
from django.test import Client, override_settings

from campaigns.models import Campaign, CampaignStatus, Contact, ContactList, ListMembership
from delivery.api.keys import api_key_create
from delivery.models import Message, MessageStatus
from tests.api.support import response_check
from tests.engine_support import number_on, settle, simulator_calling, work_burst
from tests.factories import make_template
from tests.webhooks.support import APP_SECRET
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db(transaction=True)

RECIPIENTS = 20
FAILING = {f"+55119800000{i:02d}": 131026 for i in (3, 7, 11)}
REPLIES = {"+5511980000001": "Thanks!", "+5511980000002": "STOP"}


def phone(i: int) -> str:
    return f"+55119800000{i:02d}"


class Api:
    """The API through Django's test client, every answer checked against the document."""

    def __init__(self, key: str) -> None:
        self.client = Client()
        self.auth = {"Authorization": f"Bearer {key}"}

    def __call__(
        self, method: str, path: str, *, id: int | None = None, body: Any = None, **headers: str
    ) -> tuple[HttpResponse, Any]:
        response = self.client.generic(
            method.upper(),
            "/api/v1" + path.format(id=id),
            data=b"" if body is None else json.dumps(body).encode(),
            content_type="application/json",
            headers={**self.auth, **headers},
        )
        return response, response_check(path, method, response)


def spring_list(count: int, *, name: str) -> ContactList:
    contact_list = ContactList.objects.create(name=name)
    contacts = Contact.objects.bulk_create(
        Contact(phone=phone(i), name=f"Cliente {i:02d}") for i in range(count)
    )
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=contact_list, contact=c) for c in contacts
    )
    return contact_list


def draft_body(number_id: str, *, name: str, lists: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "phone_number_id": number_id,
        "template": {"name": "spring_sale", "language": "pt_BR"},
        "mapping": {"body": {"1": {"field": "name"}}},
        "audience": {"lists": lists},
    }


def db_counts(campaign_id: int) -> dict[str, int]:
    counted = Counter(
        Message.objects.filter(campaign_id=campaign_id).values_list("status", flat=True)
    )
    return {status: counted.get(status, 0) for status in MessageStatus.values}


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0, WHATSAPP_APP_SECRET=APP_SECRET)
def test_a_campaign_through_the_api_from_draft_to_report(live_server: Any) -> None:
    with simulator_calling(
        live_server,
        APP_SECRET,
        seed=7,
        read_fraction=0.5,
        async_fail_recipients=FAILING,
        reply_recipients=REPLIES,
    ) as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        make_template(
            account=number.account,
            name="spring_sale",
            language="pt_BR",
            body_text="Oi {{1}}, a promoção de primavera começou!",
        )
        sim.add_template(
            name="spring_sale",
            language="pt_BR",
            body_params=1,
            waba_id=number.account.waba_id,
            category="MARKETING",
        )
        spring_list(RECIPIENTS, name="spring")
        _, raw = api_key_create(
            name="shop", phone_number_ids=[number.phone_number_id], scopes=["campaigns"]
        )
        api = Api(raw)

        body = draft_body(number.phone_number_id, name="Spring sale", lists=["spring"])
        created, draft = api("post", "/campaigns", body=body, **{"Idempotency-Key": "spring-1"})
        assert created.status_code == 201, draft
        campaign_id = draft["id"]
        assert created["Location"].endswith(f"/api/v1/campaigns/{campaign_id}")

        response, preflight = api("get", "/campaigns/{id}/preflight", id=campaign_id)
        assert response.status_code == 200
        assert preflight["ok"] is True, preflight["findings"]
        assert (preflight["contacts"], preflight["audience"]) == (RECIPIENTS, RECIPIENTS)
        assert not [f for f in preflight["findings"] if f["level"] == "error"]

        response, launched = api("post", "/campaigns/{id}/launch", id=campaign_id)
        assert response.status_code == 200, launched
        assert launched["campaign"]["status"] == "running"
        assert launched["launch"]["pending"] == RECIPIENTS

        settle(sim)
        sent_to = sorted(
            "+" + json.loads(r["body"])["to"].lstrip("+")
            for r in sim.records(bodies=True)
            if r.get("body")
        )

    # --- its status, as the database has it ---------------------------------------------------
    assert sent_to == [phone(i) for i in range(RECIPIENTS)]  # each recipient once
    counts = db_counts(campaign_id)
    assert counts["failed"] == len(FAILING)
    assert counts["delivered"] + counts["read"] == RECIPIENTS - len(FAILING)
    response, status = api("get", "/campaigns/{id}", id=campaign_id)
    assert response.status_code == 200
    campaign = Campaign.objects.get(pk=campaign_id)
    assert (status["status"], campaign.status) == ("completed", CampaignStatus.COMPLETED)
    assert status["counts"] == counts
    assert status["progress"] == {
        "total": RECIPIENTS,
        "done": RECIPIENTS,
        "remaining": 0,
        "percent": 100.0,
    }
    assert status["started_at"] == campaign.started_at.isoformat()  # type: ignore[union-attr]
    assert status["completed_at"] == campaign.completed_at.isoformat()  # type: ignore[union-attr]

    # --- the report, by hand ------------------------------------------------------------------
    response, report = api("get", "/campaigns/{id}/report", id=campaign_id)
    assert response.status_code == 200
    assert report["counts"] == counts
    sent = RECIPIENTS - len(FAILING)
    delivered = counts["delivered"] + counts["read"]
    figures = report["figures"]
    assert (figures["audience"], figures["sent"], figures["failed"]) == (
        RECIPIENTS,
        sent,
        len(FAILING),
    )
    assert (figures["delivered"], figures["read"]) == (delivered, counts["read"])
    replied = InboundMessage.objects.filter(campaign_id=campaign_id)
    assert replied.count() == 2
    assert (figures["replies"], figures["opt_outs"]) == (2, 1)
    assert report["rates"]["delivered"] == round(delivered / sent, 4)
    assert report["rates"]["read"] == round(counts["read"] / delivered, 4)
    assert report["rates"]["replied"] == round(2 / delivered, 4)
    assert report["rates"]["failed"] == round(len(FAILING) / RECIPIENTS, 4)
    assert report["failures"] == [
        {"status": "failed", "code": 131026, "title": report["failures"][0]["title"], "count": 3}
    ]
    assert report["conversions"]["messages_sent"] == sent
    assert report["duration_seconds"] is not None and report["duration_seconds"] >= 0

    # --- results.csv: one row per recipient, each with its message's status -------------------
    response, _ = api("get", "/campaigns/{id}/results.csv", id=campaign_id)
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == RECIPIENTS
    in_db = dict(Message.objects.filter(campaign_id=campaign_id).values_list("to", "status"))
    assert {r["phone"]: r["status"] for r in rows} == in_db
    assert {r["phone"] for r in rows if r["status"] == "failed"} == set(FAILING)
    assert {r["phone"]: r["replies"] for r in rows if r["replies"] != "0"} == dict.fromkeys(
        REPLIES, "1"
    )

    # --- a replay creates nothing, over HTTP too ----------------------------------------------
    replay = requests.post(
        f"{live_server.url}/api/v1/campaigns",
        data=json.dumps(body),
        headers={**api.auth, "Content-Type": "application/json", "Idempotency-Key": "spring-1"},
        timeout=30,
    )
    assert replay.status_code == 200 and replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json()["id"] == campaign_id
    assert Campaign.objects.count() == 1

    # --- what no longer applies ---------------------------------------------------------------
    for path in ("/campaigns/{id}/launch", "/campaigns/{id}/pause", "/campaigns/{id}/cancel"):
        response, refused = api("post", path, id=campaign_id)
        assert response.status_code == 409, path
        assert refused["error"]["fields"] == {"status": "completed"}


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0, WHATSAPP_APP_SECRET=APP_SECRET)
def test_pause_resume_and_cancel_through_the_api_on_the_simulator(live_server: Any) -> None:
    with simulator_calling(live_server, APP_SECRET, seed=3) as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        make_template(account=number.account, name="spring_sale", language="pt_BR")
        sim.add_template(
            name="spring_sale",
            language="pt_BR",
            body_params=1,
            waba_id=number.account.waba_id,
            category="MARKETING",
        )
        spring_list(10, name="spring")
        _, raw = api_key_create(
            name="shop", phone_number_ids=[number.phone_number_id], scopes=["campaigns"]
        )
        api = Api(raw)

        # Launched, then paused before any worker ran: nothing goes out.
        _, paused_one = api(
            "post",
            "/campaigns",
            body=draft_body(number.phone_number_id, name="A", lists=["spring"]),
        )
        first = paused_one["id"]
        assert api("post", "/campaigns/{id}/launch", id=first)[0].status_code == 200
        response, paused = api("post", "/campaigns/{id}/pause", id=first)
        assert (response.status_code, paused["status"]) == (200, "paused")
        work_burst()
        assert sim.records() == []
        assert db_counts(first)["pending"] == 10
        response, refused = api("post", "/campaigns/{id}/launch", id=first)
        assert (response.status_code, refused["error"]["fields"]) == (409, {"status": "paused"})

        # Resumed: it continues where it stopped and completes.
        response, resumed = api("post", "/campaigns/{id}/resume", id=first)
        assert (response.status_code, resumed["status"]) == (200, "running")
        settle(sim)
        assert len(sim.records()) == 10
        _, done = api("get", "/campaigns/{id}", id=first)
        assert done["status"] == "completed"
        assert done["counts"] == db_counts(first)
        assert done["counts"]["pending"] == 0
        response, refused = api("post", "/campaigns/{id}/resume", id=first)
        assert (response.status_code, refused["error"]["fields"]) == (409, {"status": "completed"})

        # Launched, then cancelled before its sends: every message cancelled, none sent.
        sim.reset()
        _, second_draft = api(
            "post",
            "/campaigns",
            body=draft_body(number.phone_number_id, name="B", lists=["spring"]),
        )
        second = second_draft["id"]
        api("post", "/campaigns/{id}/launch", id=second)
        response, cancelled = api("post", "/campaigns/{id}/cancel", id=second)
        assert response.status_code == 200
        assert cancelled["cancelled_messages"] == 10
        assert cancelled["campaign"]["status"] == "cancelled"
        settle(sim)
        assert sim.records() == []
        assert db_counts(second)["cancelled"] == 10
        for path in TRANSITIONS:
            response, refused = api("post", path, id=second)
            assert response.status_code == 409, path
            assert refused["error"]["fields"] == {"status": "cancelled"}
        _, listed = api("get", "/campaigns", **{})
        assert [(c["id"], c["status"]) for c in listed["data"]] == [
            (first, "completed"),
            (second, "cancelled"),
        ]


TRANSITIONS = (
    "/campaigns/{id}/launch",
    "/campaigns/{id}/pause",
    "/campaigns/{id}/resume",
    "/campaigns/{id}/cancel",
)
