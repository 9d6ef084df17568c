"""Status webhooks: Meta's payload, signatures over the raw bytes, batching, order, retries."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from delivery.simulator.config import parent_user_id_for, user_id_for, username_for
from tests.simulator.helpers import post, template_body
from tests.simulator_fixtures import SIM_APP_SECRET, SIM_DISPLAY_NUMBER, SIM_PHONE_NUMBER_ID


def statuses(receiver) -> list[dict[str, Any]]:
    found = []
    for received in receiver.received:
        payload = json.loads(received.body)
        for entry in payload["entry"]:
            for change in entry["changes"]:
                found.extend(change["value"]["statuses"])
    return found


def send_and_settle(simulator, receiver, n: int = 1, **config: Any) -> list[str]:
    simulator.configure(callback_url=receiver.url, **config)
    wamids = []
    for i in range(n):
        response = post(simulator.url, template_body(to=f"+1416555{i:04d}", callback=f"wb:{i}"))
        assert response.ok, response.text
        wamids.append(response.json()["messages"][0]["id"])
    assert simulator.wait_webhooks_idle(10)
    return wamids


def test_signature_verifies_over_the_exact_raw_bytes(simulator, webhook_receiver) -> None:
    send_and_settle(simulator, webhook_receiver, n=3, read_fraction=1.0)

    assert len(webhook_receiver.received) == 9
    for received in webhook_receiver.received:
        header = received.headers["X-Hub-Signature-256"]
        expected = hmac.new(SIM_APP_SECRET.encode(), received.body, hashlib.sha256).hexdigest()
        assert header.startswith("sha256=")
        assert hmac.compare_digest(header.removeprefix("sha256="), expected)
        wrong = hmac.new(b"other-secret", received.body, hashlib.sha256).hexdigest()
        assert header.removeprefix("sha256=") != wrong


def test_payload_escapes_like_meta_so_reserialising_breaks_the_signature(
    simulator, webhook_receiver
) -> None:
    simulator.configure(callback_url=webhook_receiver.url, read_fraction=0, delivered_fraction=0)
    post(simulator.url, template_body(callback="user@example.com/é<%"))
    assert simulator.wait_webhooks_idle(5)

    [received] = webhook_receiver.received
    assert b"\\u0040" in received.body and b"\\/" in received.body
    assert b"\\u003C" in received.body and b"\\u0025" in received.body
    [status] = statuses(webhook_receiver)
    assert status["biz_opaque_callback_data"] == "user@example.com/é<%"
    reserialised = json.dumps(json.loads(received.body)).encode()
    digest = hmac.new(SIM_APP_SECRET.encode(), reserialised, hashlib.sha256).hexdigest()
    assert "sha256=" + digest != received.headers["X-Hub-Signature-256"]


def test_sent_delivered_read_in_meta_shape(simulator, webhook_receiver) -> None:
    [wamid] = send_and_settle(simulator, webhook_receiver, read_fraction=1.0)

    bodies = [json.loads(r.body) for r in webhook_receiver.received]
    for body in bodies:
        assert body["object"] == "whatsapp_business_account"
        [entry] = body["entry"]
        assert entry["id"] == "102290129340398"
        [change] = entry["changes"]
        assert change["field"] == "messages"
        assert change["value"]["messaging_product"] == "whatsapp"
        assert change["value"]["metadata"] == {
            "display_phone_number": SIM_DISPLAY_NUMBER,
            "phone_number_id": SIM_PHONE_NUMBER_ID,
        }
    by_status = {s["status"]: s for s in statuses(webhook_receiver)}
    assert set(by_status) == {"sent", "delivered", "read"}
    sent, delivered, read = by_status["sent"], by_status["delivered"], by_status["read"]
    for status in (sent, delivered, read):
        assert status["id"] == wamid
        assert status["recipient_id"] == "14165550000"
        assert status["biz_opaque_callback_data"] == "wb:0"
        assert status["timestamp"].isdigit()
    assert sent["pricing"] == {
        "billable": True,
        "pricing_model": "PMP",
        "type": "regular",
        "category": "marketing",
    }
    assert sent["conversation"]["origin"] == {"type": "marketing"}
    assert sent["conversation"]["expiration_timestamp"].isdigit()
    assert "pricing" in delivered and "expiration_timestamp" not in delivered["conversation"]
    assert "pricing" not in read and "conversation" not in read


def test_async_failure_sends_failed_with_errors_array(simulator, webhook_receiver) -> None:
    [wamid] = send_and_settle(
        simulator, webhook_receiver, async_failure_fraction=1.0, async_failure_code=131049
    )

    [failed] = statuses(webhook_receiver)
    assert failed["status"] == "failed" and failed["id"] == wamid
    [error] = failed["errors"]
    assert error["code"] == 131049
    assert error["title"] == error["message"]
    assert error["error_data"]["details"]
    assert error["href"].endswith("error-codes")
    assert simulator.records()[0]["outcome"] == "accepted_async_failure"


def test_batches_several_statuses_per_post(simulator, webhook_receiver) -> None:
    send_and_settle(
        simulator,
        webhook_receiver,
        n=10,
        read_fraction=1.0,
        webhook_batch_size=50,
        webhook_batch_wait_ms=300,
    )

    assert len(statuses(webhook_receiver)) == 30
    assert len(webhook_receiver.received) < 10
    assert (
        max(
            len(json.loads(r.body)["entry"][0]["changes"][0]["value"]["statuses"])
            for r in webhook_receiver.received
        )
        > 1
    )


def test_out_of_order_delivery(simulator, webhook_receiver) -> None:
    send_and_settle(
        simulator,
        webhook_receiver,
        n=20,
        read_fraction=1.0,
        webhook_out_of_order=True,
        webhook_jitter_ms=30,
    )

    rank = {"sent": 0, "delivered": 1, "read": 2}
    arrivals: dict[str, list[int]] = {}
    for status in statuses(webhook_receiver):
        arrivals.setdefault(status["id"], []).append(rank[status["status"]])
    assert len(arrivals) == 20
    assert any(order != sorted(order) for order in arrivals.values())


def test_duplicates(simulator, webhook_receiver) -> None:
    send_and_settle(
        simulator, webhook_receiver, n=5, read_fraction=0, webhook_duplicate_fraction=1.0
    )

    counts = Counter((s["id"], s["status"]) for s in statuses(webhook_receiver))
    assert len(counts) == 10
    assert set(counts.values()) == {2}


def test_non_200_is_retried_with_the_same_bytes(simulator, webhook_receiver) -> None:
    webhook_receiver.statuses = [500, 403]
    send_and_settle(
        simulator,
        webhook_receiver,
        read_fraction=0,
        delivered_fraction=0,
        webhook_retry_base_s=0.05,
    )

    assert len(webhook_receiver.received) == 3
    assert len({r.body for r in webhook_receiver.received}) == 1
    stats = simulator.stats()["webhooks"]
    assert (stats["retries"], stats["posts_ok"], stats["statuses_delivered"]) == (2, 1, 1)


def test_gives_up_after_the_last_retry(simulator, webhook_receiver) -> None:
    webhook_receiver.statuses = [500] * 10
    send_and_settle(
        simulator,
        webhook_receiver,
        read_fraction=0,
        delivered_fraction=0,
        webhook_retry_base_s=0.01,
        webhook_retry_max=2,
    )

    assert len(webhook_receiver.received) == 3
    assert simulator.stats()["webhooks"]["statuses_dropped"] == 1


def test_no_callback_url_no_webhooks(simulator, webhook_receiver) -> None:
    assert post(simulator.url, template_body()).ok
    assert simulator.wait_webhooks_idle(1)
    assert webhook_receiver.received == []


def test_a_held_answer_still_reports_the_message_as_sent(simulator, webhook_receiver) -> None:
    simulator.configure(
        callback_url=webhook_receiver.url,
        mode="all_timeout",
        timeout_hold_s=1.0,
        read_fraction=0,
        delivered_fraction=0,
    )
    with pytest.raises(requests.ReadTimeout):
        post(simulator.url, template_body(to="+14165551234", callback="wb:42"), timeout=0.2)
    assert simulator.wait_webhooks_idle(5)

    [sent] = statuses(webhook_receiver)
    assert (sent["status"], sent["biz_opaque_callback_data"]) == ("sent", "wb:42")
    assert sent["id"] == simulator.records()[0]["wamid"]


def _changes(receiver) -> list[dict[str, Any]]:
    return [
        change
        for received in receiver.received
        for entry in json.loads(received.body)["entry"]
        for change in entry["changes"]
    ]


def test_events_meta_sends_on_its_own_are_posted_signed_and_change_the_simulator(
    simulator, webhook_receiver
) -> None:
    simulator.configure(callback_url=webhook_receiver.url)
    base = f"{simulator.url}/_sim/events"

    def event(body: dict[str, Any]) -> None:
        # Each callback goes out on its own POST, concurrently with any other in flight (as
        # Meta's do, in no promised order): waiting for each keeps the list below in order.
        assert requests.post(base, json=body, timeout=5).ok
        assert simulator.wait_webhooks_idle(10)

    event({"kind": "template_status", "name": "promo", "language": "en_US", "event": "PAUSED"})
    event({"kind": "template_category", "name": "promo", "new_category": "UTILITY"})
    event({"kind": "template_quality", "name": "promo", "new_quality_score": "RED"})
    event({"kind": "account_update", "event": "ACCOUNT_DELETED"})
    moved = {"kind": "user_changed_number", "phone_number_id": SIM_PHONE_NUMBER_ID}
    event(moved | {"old": "+16505551234", "new": "+12195555358"})
    renamed = {"kind": "user_changed_user_id", "phone_number_id": SIM_PHONE_NUMBER_ID}
    event(renamed | {"old_user_id": "US.1", "new_user_id": "US.2", "phone": "+12195555358"})

    for received in webhook_receiver.received:
        expected = hmac.new(SIM_APP_SECRET.encode(), received.body, hashlib.sha256).hexdigest()
        assert received.headers["X-Hub-Signature-256"] == f"sha256={expected}"
    changes = _changes(webhook_receiver)
    assert [c["field"] for c in changes] == [
        "message_template_status_update",
        "template_category_update",
        "message_template_quality_update",
        "account_update",
        "messages",
        "messages",
    ]
    status, category, quality, account, number, user_id = (c["value"] for c in changes)
    assert status["event"] == "PAUSED" and status["message_template_name"] == "promo"
    assert isinstance(status["message_template_id"], int)
    assert (category["previous_category"], category["new_category"]) == ("MARKETING", "UTILITY")
    assert (quality["previous_quality_score"], quality["new_quality_score"]) == ("GREEN", "RED")
    assert account == {"event": "ACCOUNT_DELETED"}
    [system] = number["messages"]
    assert system["from"] == "16505551234" and "contacts" not in number
    assert system["system"] == {
        "body": "User Sim User changed from 16505551234 to 12195555358",
        "wa_id": "12195555358",
        "type": "user_changed_number",
    }
    [system] = user_id["messages"]
    assert (system["from_user_id"], system["from"]) == ("US.1", "12195555358")
    assert system["system"]["user_id"] == "US.2"
    assert system["system"]["type"] == "user_changed_user_id"
    # The paused template is now refused as Meta would refuse it.
    response = post(simulator.url, template_body())
    assert response.json()["error"]["code"] == 132015
    unknown = requests.post(base, json={"kind": "nope"}, timeout=5)
    assert unknown.status_code == 400 and "template_status" in unknown.json()["error"]


def test_a_send_to_a_user_id_is_answered_and_reported_without_a_phone(
    simulator, webhook_receiver
) -> None:
    simulator.configure(callback_url=webhook_receiver.url, read_fraction=0)
    body = template_body()
    del body["to"]
    body["recipient"] = "CA.13491208655302741918"
    response = post(simulator.url, body)
    assert response.ok, response.text
    assert response.json()["contacts"] == [
        {"input": "CA.13491208655302741918", "user_id": "CA.13491208655302741918"}
    ]
    assert simulator.wait_webhooks_idle(10)
    found = statuses(webhook_receiver)
    assert {s["status"] for s in found} == {"sent", "delivered"}
    assert all("recipient_id" not in s for s in found)
    assert {s["recipient_user_id"] for s in found} == {"CA.13491208655302741918"}
    body["recipient"] = "+16505551234"  # not a user id
    assert post(simulator.url, body).json()["error"]["code"] == 100


class _HoldingServer(ThreadingHTTPServer):
    request_queue_size = 256  # every POST's connection is taken, none waits on the backlog
    daemon_threads = True


@pytest.mark.parametrize("concurrency", [10, 80])
def test_as_many_posts_are_in_flight_as_the_concurrency_setting_allows(
    simulator, concurrency: int
) -> None:
    """Meta holds many callbacks in flight against a slow receiver; the simulator holds
    exactly ``webhook_concurrency`` of them, no more and (past any pool size of its own) no
    fewer. The receiver keeps each POST until it has seen the most it will, or 10 s pass."""
    sends = 90
    in_flight = 0
    most = 0
    lock = threading.Condition()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            nonlocal in_flight, most
            self.rfile.read(int(self.headers["Content-Length"]))
            with lock:
                in_flight += 1
                most = max(most, in_flight)
                lock.notify_all()
                lock.wait_for(lambda: most >= concurrency, timeout=10)
                in_flight -= 1
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = _HoldingServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        simulator.configure(
            callback_url=f"http://127.0.0.1:{server.server_address[1]}/webhooks/whatsapp",
            webhook_concurrency=concurrency,
            delivered_fraction=0,
            read_fraction=0,
            sent_delay_ms=300,  # every send is in before the first status falls due
        )
        for i in range(sends):
            assert post(simulator.url, template_body(to=f"+1416555{i:04d}")).ok
        assert simulator.wait_webhooks_idle(30)
    finally:
        server.shutdown()
        server.server_close()
    assert most == concurrency


# --- who the user is: Meta's 2026 shapes (sources in delivery/simulator/webhooks.py) -------


def values(receiver: Any) -> list[dict[str, Any]]:
    return [
        change["value"]
        for received in receiver.received
        for entry in json.loads(received.body)["entry"]
        for change in entry["changes"]
    ]


def test_a_phone_send_names_the_user_id_in_contacts_never_in_the_status(
    simulator: Any, webhook_receiver: Any
) -> None:
    """Meta, "Business-scoped user IDs" (Updated 2026-02-06): recipient_user_id only for a
    send to a user id; a send to a phone names the user's id in value.contacts[]."""
    simulator.configure(
        callback_url=webhook_receiver.url, read_fraction=1.0, webhook_parent_user_ids=True
    )
    response = post(simulator.url, template_body(to="+49 151 2345 6789"))
    assert response.ok, response.text
    assert simulator.wait_webhooks_idle(10)

    found = values(webhook_receiver)
    assert sorted(s["status"] for v in found for s in v["statuses"]) == [
        "delivered",
        "read",
        "sent",
    ]
    for value in found:
        [status] = value["statuses"]
        assert status["recipient_id"] == "4915123456789"
        assert "recipient_user_id" not in status
        assert value["contacts"] == [
            {
                "profile": {"name": "Sim User"},
                "wa_id": "4915123456789",
                "user_id": user_id_for("4915123456789"),
                "parent_user_id": parent_user_id_for("4915123456789"),
            }
        ]
    assert user_id_for("4915123456789").startswith("US.")
    assert parent_user_id_for("4915123456789").startswith("US.ENT.")


def test_a_failed_status_carries_no_contacts_and_parents_are_off_by_default(
    simulator: Any, webhook_receiver: Any
) -> None:
    simulator.configure(
        callback_url=webhook_receiver.url,
        read_fraction=0.0,
        async_fail_recipients={"+4915100000001": 131026},
    )
    assert post(simulator.url, template_body(to="+4915100000001", callback="wb:1")).ok
    assert post(simulator.url, template_body(to="+4915100000002", callback="wb:2")).ok
    assert simulator.wait_webhooks_idle(10)

    by_callback: dict[str, list[dict[str, Any]]] = {}
    for value in values(webhook_receiver):
        for status in value["statuses"]:
            by_callback.setdefault(status["biz_opaque_callback_data"], []).append(value)
    [failed] = by_callback["wb:1"]
    assert failed["statuses"][0]["status"] == "failed" and "contacts" not in failed
    assert len(by_callback["wb:2"]) == 2
    for value in by_callback["wb:2"]:
        assert value["contacts"] == [
            {
                "profile": {"name": "Sim User"},
                "wa_id": "4915100000002",
                "user_id": user_id_for("4915100000002"),
            }
        ]


def test_a_user_id_send_is_reported_by_user_id_with_no_phone_anywhere(
    simulator: Any, webhook_receiver: Any
) -> None:
    user_id = "BR.ENT.88127766551234"
    simulator.configure(
        callback_url=webhook_receiver.url, read_fraction=0.0, username_recipients=[user_id]
    )
    body = template_body()
    del body["to"]
    body["recipient"] = user_id
    assert post(simulator.url, body).ok
    assert simulator.wait_webhooks_idle(10)

    found = values(webhook_receiver)
    assert sorted(s["status"] for v in found for s in v["statuses"]) == ["delivered", "sent"]
    for value in found:
        [status] = value["statuses"]
        assert status["recipient_user_id"] == user_id and "recipient_id" not in status
        assert value["contacts"] == [
            {"profile": {"name": "Sim User", "username": username_for(user_id)}, "user_id": user_id}
        ]
    assert username_for(user_id).startswith("@sim")


def test_statuses_without_user_ids_when_switched_off(simulator: Any, webhook_receiver: Any) -> None:
    simulator.configure(
        callback_url=webhook_receiver.url, read_fraction=0.0, webhook_user_ids=False
    )
    assert post(simulator.url, template_body(to="+4915100000003")).ok
    assert simulator.wait_webhooks_idle(10)
    found = values(webhook_receiver)
    assert len(found) == 2 and not [v for v in found if "contacts" in v]
    assert all("recipient_user_id" not in v["statuses"][0] for v in found)


def test_a_marketing_template_to_a_us_number_is_accepted_then_fails_with_131049(
    simulator, webhook_receiver
) -> None:
    """Meta's pause of marketing templates to US users: a 200 with a wamid, then a failed
    status with 131049; a Canadian +1 number and a Jamaican one are delivered."""
    simulator.configure(callback_url=webhook_receiver.url, read_fraction=0)
    for to in ("+12122345678", "+14165551234", "+18765551234"):
        response = post(simulator.url, template_body(to=to, callback=f"wb:{to}"))
        assert response.ok, response.text
    assert simulator.wait_webhooks_idle(10)
    final = {s["recipient_id"]: s for s in statuses(webhook_receiver)}
    assert final["12122345678"]["status"] == "failed"
    assert final["12122345678"]["errors"][0]["code"] == 131049
    assert {
        s["status"] for s in statuses(webhook_receiver) if s["recipient_id"] != "12122345678"
    } == {
        "sent",
        "delivered",
    }
