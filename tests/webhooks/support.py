"""Webhook test helpers: recorded Meta payloads, signing, messages to match them."""

from __future__ import annotations

import copy
import hashlib
import hmac
import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import connection
from django.utils import timezone

from campaigns.models import PhoneNumber
from delivery.models import Message
from tests.factories import make_phone_number
from webhooks.applier import ApplyReport, events_drain
from webhooks.services import event_store

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "webhooks"
APP_SECRET = "test-app-secret"
VERIFY_TOKEN = "test-verify-token"
URL = "/webhooks/whatsapp"

_seq = itertools.count(1)


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


def fixture_json(name: str) -> dict[str, Any]:
    return json.loads(fixture_bytes(name))


def meta_bytes(payload: dict[str, Any]) -> bytes:
    """Serialise like Meta: compact, ASCII-only, with ``/`` and ``@`` escaped."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=True)
    return text.replace("/", "\\/").replace("@", "\\u0040").encode()


def sign(body: bytes, secret: str = APP_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def statuses_of(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        status
        for entry in payload["entry"]
        for change in entry["changes"]
        for status in change["value"].get("statuses", [])
    ]


def retarget(
    payload: dict[str, Any],
    *,
    callbacks: dict[str, str | None] | None = None,
    wamids: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A copy of a recorded payload pointed at this test's messages.

    ``callbacks`` maps the recorded ``biz_opaque_callback_data`` to ours (``None`` drops
    it); ``wamids`` maps recorded wamids to ours.
    """
    payload = copy.deepcopy(payload)
    for status in statuses_of(payload):
        if wamids and status["id"] in wamids:
            status["id"] = wamids[status["id"]]
        recorded = status.get("biz_opaque_callback_data")
        if callbacks and recorded in callbacks:
            if callbacks[recorded] is None:
                del status["biz_opaque_callback_data"]
            else:
                status["biz_opaque_callback_data"] = callbacks[recorded]
    return payload


def make_message(
    *, phone_number: PhoneNumber | None = None, status: str = "sent", **fields: Any
) -> Message:
    n = next(_seq)
    fields.setdefault("to", f"+1650555{n:04d}")
    fields.setdefault("next_attempt_at", timezone.now())
    return Message.objects.create(
        phone_number=phone_number or make_phone_number(), status=status, **fields
    )


def store(payload: dict[str, Any] | bytes) -> int | None:
    body = payload if isinstance(payload, bytes) else meta_bytes(payload)
    return event_store(body=body)


def apply() -> ApplyReport:
    return events_drain(budget_seconds=30)


def store_and_apply(payload: dict[str, Any] | bytes) -> ApplyReport:
    store(payload)
    return apply()


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """For what another thread does after a response: the group committer answers a POST
    once its batch is committed, then counts it and schedules the applier."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def inserts_held_by_lock() -> int:
    """Batch INSERTs into the events table waiting for a lock: committers that hold a batch
    and are stopped by the ``table_lock`` fixture."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # a fresh view on each call
        cursor.execute(
            """
            SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'
              AND query LIKE '%INSERT INTO webhooks_webhookevent%'
            """
        )
        (count,) = cursor.fetchone()
    return int(count)
