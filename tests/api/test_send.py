"""A message sent through the API reaches the simulator as Meta's JSON, on the first try."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from delivery.api.keys import api_key_create
from delivery.models import Message, MessageKind
from delivery.service_windows import service_windows_record
from tests.api.support import Api, template_body
from tests.engine_support import number_on, running_simulator, work_burst
from tests.factories import make_template
from tests.webhooks.support import APP_SECRET, URL, apply, meta_bytes, sign
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_template_send_carries_its_params_header_and_buttons() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=80)
        make_template(
            account=number.account,
            name="otp",
            body_param_count=1,
            buttons=[{"index": 0, "type": "URL", "sub_type": "url", "param": "required"}],
        )
        sim.add_template(name="otp", language="en_US", body_params=1, buttons=["url"])
        _, raw = api_key_create(name="shop", phone_number_ids=[number.phone_number_id])
        params = {"body": ["482913"], "buttons": [{"sub_type": "url", "index": 0, "value": "c"}]}
        response, created = Api(raw).send(template_body(number, params=params))
        work_burst("transactional")
        records = sim.records(bodies=True)
    assert response.status_code == 202
    message = Message.objects.get(pk=created["id"])
    assert message.kind == MessageKind.TRANSACTIONAL and message.campaign_id is None
    assert message.status == "sent"
    [record] = records
    sent = json.loads(record["body"])
    assert sent["to"] == "+5511987650001"
    assert sent["biz_opaque_callback_data"] == f"wb:{message.pk}"
    components = {c["type"]: c for c in sent["template"]["components"]}
    assert components["body"]["parameters"] == [{"type": "text", "text": "482913"}]
    assert components["button"]["parameters"] == [{"type": "text", "text": "c"}]


def test_a_text_inside_the_service_window_is_sent_as_text() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=80)
        _, raw = api_key_create(name="support", phone_number_ids=[number.phone_number_id])
        InboundMessage.objects.create(
            wamid="wamid.in.1",
            from_phone="+5511987650001",
            type="text",
            text="where is my order?",
            sent_at=timezone.now() - timedelta(minutes=3),
            phone_number=number,
            payload={},
        )
        service_windows_record(
            [(number.pk, "+5511987650001", timezone.now() - timedelta(minutes=3))]
        )
        body = {
            "phone_number_id": number.phone_number_id,
            "to": "+5511987650001",
            "text": "It ships today.",
        }
        response, _ = Api(raw).send(body)
        work_burst("transactional")
        [record] = sim.records(bodies=True)
    assert response.status_code == 202
    sent = json.loads(record["body"])
    assert sent["type"] == "text" and sent["text"]["body"] == "It ships today."


REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def test_a_user_known_only_by_user_id_writes_in_and_gets_an_answer_by_it(settings: Any) -> None:
    """Meta's 2026 example of a text from a user who shares no phone (tests/fixtures/real,
    README): its sender is ``from_user_id`` alone. The reply through the API goes to that
    user id, in Meta's ``recipient``, inside the window that message opened."""
    settings.WHATSAPP_APP_SECRET = APP_SECRET
    payload = json.loads(
        (REAL / "inbound" / "meta_doc_2026_02_bsuid_text_no_phone.json").read_text()
    )
    [message] = payload["entry"][0]["changes"][0]["value"]["messages"]
    user_id = message["from_user_id"]
    with running_simulator() as sim:
        number = number_on(sim, rate=80)
        make_template(account=number.account, name="otp", body_param_count=1)
        sim.add_template(name="otp", language="en_US", body_params=1)
        payload["entry"][0]["changes"][0]["value"]["metadata"]["phone_number_id"] = (
            number.phone_number_id
        )
        # Only the time is ours: the window counts 24 h from the message's own timestamp.
        message["timestamp"] = str(int(time.time()) - 60)
        body = meta_bytes(payload)
        answered = Client().post(
            URL, data=body, content_type="application/json",
            headers={"X-Hub-Signature-256": sign(body)},
        )  # fmt: skip
        assert answered.status_code == 200
        apply()
        assert InboundMessage.objects.get(from_user_id=user_id).from_phone == ""

        _, raw = api_key_create(name="support", phone_number_ids=[number.phone_number_id])
        api = Api(raw)
        text, text_created = api.send(
            {"phone_number_id": number.phone_number_id, "to": user_id, "text": "Blue and red."}
        )
        code, code_created = api.send(template_body(number, to=user_id, params={"body": ["7"]}))
        work_burst("transactional")
        bodies = [json.loads(r["body"]) for r in sim.records(bodies=True)]
    assert (text.status_code, code.status_code) == (202, 202)
    assert {b.get("type") for b in bodies} == {"text", "template"}
    for sent in bodies:
        assert sent["recipient"] == user_id and "to" not in sent
    for created in (text_created, code_created):
        row = Message.objects.get(pk=created["id"])
        assert (row.to, row.status) == (user_id, "sent")
