"""Parsing Meta's bodies: every item of every entry and change, junk skipped and counted."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.webhooks.support import FIXTURES, fixture_json, statuses_of
from webhooks.payloads import PayloadRejected, body_parse, epoch_parse, tier_normalise


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_every_recorded_payload_parses_without_malformed_items(name: str) -> None:
    parsed = body_parse(fixture_json(name))
    assert parsed.counts, name
    assert not [key for key in parsed.counts if key.startswith("malformed")], parsed.counts


def test_the_multi_entry_batch_yields_every_item() -> None:
    parsed = body_parse(fixture_json("batch_multi"))
    assert [(s.wamid, s.status) for s in parsed.statuses] == [
        ("wamid.BATCH-A", "sent"),
        ("wamid.BATCH-B", "delivered"),
        ("wamid.BATCH-A", "read"),
        ("wamid.BATCH-C", "sent"),
        ("wamid.BATCH-B", "sent"),
        ("wamid.BATCH-D", "failed"),
    ]
    assert [s.phone_number_id for s in parsed.statuses][3:5] == [
        "106540352242923",
        "106540352242924",
    ]
    assert [m.from_phone for m in parsed.inbound] == ["+16505550002"]
    assert parsed.inbound[0].profile_name == "Ana"
    assert parsed.counts["ignored.account_alerts"] == 1


def test_a_status_reads_its_callback_data_timestamps_and_failure() -> None:
    sent = body_parse(fixture_json("status_sent")).statuses[0]
    assert sent.message_id == 9001
    assert sent.timestamp == datetime.fromtimestamp(1750030073, tz=UTC)
    assert (sent.conversation_id, sent.pricing_category, sent.billable) == (
        "72b14d6bd5407799e66f64d1b338e567",
        "marketing",
        True,
    )
    failed = body_parse(fixture_json("status_failed")).statuses[0]
    assert failed.message_id is None
    assert failed.error_code == 131049


@pytest.mark.parametrize(
    "callback", ["campaign=42;recipient=9001", "wb:", "wb:0", "wb:-1", "wb:1x"]
)
def test_callback_data_that_is_not_ours_gives_no_message_id(callback: str) -> None:
    payload = fixture_json("status_sent")
    statuses_of(payload)[0]["biz_opaque_callback_data"] = callback
    assert body_parse(payload).statuses[0].message_id is None


def test_malformed_items_are_skipped_and_counted_and_the_rest_kept() -> None:
    payload = fixture_json("batch_multi")
    value = payload["entry"][0]["changes"][0]["value"]
    value["statuses"] += [
        "not an object",
        {"status": "read"},  # no id
        {"id": "wamid.X", "status": 7},
        {"id": "wamid.\u0000", "status": "read"},
        {"id": "w" * 129, "status": "read"},
    ]
    value["messages"] = [{"id": "wamid.IN", "from": "not-a-number", "type": "text"}]
    payload["entry"].append({"id": "no changes"})
    payload["entry"][1]["changes"].append({"field": "messages", "value": []})
    parsed = body_parse(payload)
    assert len(parsed.statuses) == 6
    assert parsed.counts["malformed.statuses"] == 1
    assert parsed.counts["malformed.status"] == 4
    assert parsed.counts["malformed.message"] == 1
    assert parsed.counts["malformed.entry"] == 1
    assert parsed.counts["malformed.change"] == 1


@pytest.mark.parametrize(
    "body",
    [[], "text", None, {"object": "page", "entry": []}, {"object": "whatsapp_business_account"}],
)
def test_a_body_that_is_not_a_callback_is_rejected(body: object) -> None:
    with pytest.raises(PayloadRejected):
        body_parse(body)


def test_nul_characters_never_reach_the_database() -> None:
    payload = fixture_json("inbound_text")
    message = payload["entry"][0]["changes"][0]["value"]["messages"][0]
    message["text"]["body"] = "sto\u0000p"
    assert body_parse(payload).inbound[0].text == "stop"


@pytest.mark.parametrize(
    ("value", "tier"),
    [
        ("TIER_2K", "TIER_2K"),
        ("tier_10k", "TIER_10K"),
        ("TIER_NOT_SET", ""),
        (2000, "TIER_2K"),
        ("100000", "TIER_100K"),
        (-1, "TIER_UNLIMITED"),
        (1234, ""),
        (True, ""),
        ("TIER_<script>", ""),
        (None, ""),
    ],
)
def test_messaging_limit_tiers_are_normalised(value: object, tier: str) -> None:
    assert tier_normalise(value) == tier


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1750030073", datetime.fromtimestamp(1750030073, tz=UTC)),
        (1750030073, datetime.fromtimestamp(1750030073, tz=UTC)),
        ("", None),
        ("17500e3", None),
        ("\u0661\u0662", None),  # non-ASCII digits
        ("99999999999999", None),
        (True, None),
    ],
)
def test_epoch_seconds_strings_become_aware_utc_datetimes(
    value: object, expected: datetime | None
) -> None:
    assert epoch_parse(value) == expected
