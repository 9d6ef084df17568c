"""Property: however a message's callbacks are ordered, duplicated and batched, the stored
status is the highest-ranked one received."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delivery.models import STATUS_RANK
from tests.factories import make_phone_number
from tests.webhooks.support import apply, make_message, store

pytestmark = pytest.mark.django_db

KINDS = ["sent", "delivered", "read", "failed", "played", "deleted"]
_seq = itertools.count(1)


def status_item(kind: str, wamid: str, callback: str | None, stamp: int) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": wamid,
        "status": kind,
        "timestamp": str(stamp),
        "recipient_id": "16505551234",
    }
    if callback:
        item["biz_opaque_callback_data"] = callback
    if kind == "failed":
        item["errors"] = [{"code": 131026, "title": "Message undeliverable"}]
    return item


def body(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102290129340398",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {"phone_number_id": "106540352242922"},
                            "statuses": items,
                        },
                    }
                ],
            }
        ],
    }


def chunks(items: list[Any], cuts: list[int]) -> list[list[Any]]:
    bounds = sorted({c % (len(items) + 1) for c in cuts} | {0, len(items)})
    return [items[a:b] for a, b in itertools.pairwise(bounds) if b > a]


callbacks = st.lists(
    st.tuples(st.sampled_from(KINDS), st.booleans(), st.integers(1_750_000_000, 1_750_100_000)),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(
    received=callbacks,
    duplicates=st.lists(st.integers(0, 11), max_size=6),
    order=st.randoms(use_true_random=False),
    post_cuts=st.lists(st.integers(0, 20), max_size=6),
    run_cuts=st.lists(st.integers(0, 20), max_size=4),
    start=st.sampled_from(["sending", "unknown", "sent"]),
)
def test_the_final_status_is_the_highest_rank_received(
    received: list[tuple[str, bool, int]],
    duplicates: list[int],
    order: Any,
    post_cuts: list[int],
    run_cuts: list[int],
    start: str,
) -> None:
    number = make_phone_number()
    message = make_message(phone_number=number, status=start, wamid=f"wamid.PROP-{next(_seq)}")
    items = [
        status_item(kind, message.wamid, message.callback_data if cb else None, stamp)
        for kind, cb, stamp in received
    ]
    # Meta redelivers: some callbacks come again, anywhere in the stream.
    items += [items[i % len(items)] for i in duplicates] if items else []
    order.shuffle(items)
    posts = chunks(items, post_cuts)
    for run in chunks(posts, run_cuts):
        for post in run:
            store(body(post))
        apply()

    message.refresh_from_db()
    ranked = [kind for kind, _, _ in received if kind in STATUS_RANK]
    expected = max(ranked, key=STATUS_RANK.__getitem__) if ranked else start
    assert message.status == expected
    kinds = {kind for kind, _, _ in received}
    assert (message.read_at is not None) == ("read" in kinds)
    assert (message.delivered_at is not None) == bool(kinds & {"delivered", "read"})
    # The failure is recorded when it applied; a later delivered keeps it as history.
    if expected == "failed":
        assert message.last_error_code == 131026
    if "failed" not in kinds:
        assert message.last_error_code is None
    if message.read_at is not None:
        assert int(message.read_at.timestamp()) in {s for k, _, s in received if k == "read"}
