"""docs/events.md's verification example, run as written against real deliveries."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from delivery.events.subscriptions import subscription_create
from delivery.events.worker import events_pass
from delivery.models import EventOutbox
from tests.events.receiver import Receiver

pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"


def documented_check() -> Callable[..., bool]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 1, "docs/events.md should hold one Python example"
    namespace: dict[str, Any] = {}
    exec(blocks[0], namespace)  # noqa: S102 (the documentation's own code)
    check: Callable[..., bool] = namespace["whatsblast_signature_ok"]
    return check


def test_the_documented_check_accepts_real_deliveries_and_refuses_tampering() -> None:
    check = documented_check()
    receiver = Receiver().start()
    try:
        _, secret = subscription_create(name="shop", url=receiver.url)
        EventOutbox.objects.create(event_type="message.sent", message_id=1, data={"a": 1})
        events_pass()
    finally:
        receiver.stop()
    (post,) = receiver.received
    assert check(secret, post.signature, post.body)
    tampered = post.body.replace(b'"message.sent"', b'"message.read"')
    assert tampered != post.body
    assert not check(secret, post.signature, tampered)
    assert not check("whsec_other", post.signature, post.body)
    assert not check(secret, "t=1,v1=" + post.signature.split("v1=")[1], post.body)
