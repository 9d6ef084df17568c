"""Outcome classification: the documented code table, transport failures, and properties."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delivery.cloud.client import Accepted, ApiError, parse_response
from delivery.cloud.outcomes import (
    CODE_OUTCOMES,
    TRANSIENT_CODES,
    UNKNOWN_CODE_OUTCOME,
    Outcome,
    classify,
    wait_hint_s,
)


def error(
    code: int | None,
    *,
    http_status: int | None = 400,
    reached: bool = True,
    retry_after: float | None = None,
) -> ApiError:
    return ApiError(
        http_status=http_status,
        code=code,
        subcode=None,
        title="t",
        details="d",
        retry_after_s=retry_after,
        may_have_reached_meta=reached,
        latency_s=0.01,
    )


# One row per code of cloud-api.md §2.3, with the HTTP status Meta's table gives it.
DOCUMENTED = [
    (130429, 400, Outcome.THROTTLED),
    (131056, 400, Outcome.PAIR_LIMITED),
    (4, 400, Outcome.THROTTLED),
    (80007, 400, Outcome.THROTTLED),
    (613, 400, Outcome.THROTTLED),
    (131048, 400, Outcome.SPAM_LIMITED),
    (131049, 400, Outcome.USER_CAPPED),
    (131064, 400, Outcome.CAMPAIGN_BROKEN),
    (131057, 500, Outcome.THROTTLED),
    (133016, 400, Outcome.CAMPAIGN_BROKEN),
    (131026, 400, Outcome.PERMANENT),
    (131050, 400, Outcome.OPTED_OUT),
    (131047, 400, Outcome.PERMANENT),
    (130472, 400, Outcome.PERMANENT),
    (131030, 400, Outcome.CAMPAIGN_BROKEN),
    (131021, 400, Outcome.PERMANENT),
    (131051, 400, Outcome.CAMPAIGN_BROKEN),
    (137000, 400, Outcome.PERMANENT),
    (131062, 400, Outcome.PERMANENT),
    (132000, 400, Outcome.CAMPAIGN_BROKEN),
    (132001, 404, Outcome.CAMPAIGN_BROKEN),
    (132005, 400, Outcome.PERMANENT),
    (132007, 400, Outcome.PERMANENT),
    (132008, 400, Outcome.PERMANENT),
    (132012, 400, Outcome.CAMPAIGN_BROKEN),
    (132015, 400, Outcome.CAMPAIGN_BROKEN),
    (132016, 400, Outcome.CAMPAIGN_BROKEN),
    (132068, 400, Outcome.CAMPAIGN_BROKEN),
    (132069, 400, Outcome.CAMPAIGN_BROKEN),
    (131052, 400, Outcome.CAMPAIGN_BROKEN),
    (131053, 400, Outcome.CAMPAIGN_BROKEN),
    (100, 400, Outcome.CAMPAIGN_BROKEN),
    (131008, 400, Outcome.CAMPAIGN_BROKEN),
    (131009, 400, Outcome.CAMPAIGN_BROKEN),
    (135000, 400, Outcome.CAMPAIGN_BROKEN),
    (33, 400, Outcome.CAMPAIGN_BROKEN),
    (0, 401, Outcome.CAMPAIGN_BROKEN),
    (3, 500, Outcome.CAMPAIGN_BROKEN),
    (10, 403, Outcome.CAMPAIGN_BROKEN),
    (190, 401, Outcome.CAMPAIGN_BROKEN),
    (200, 403, Outcome.CAMPAIGN_BROKEN),
    (250, 403, Outcome.CAMPAIGN_BROKEN),
    (299, 403, Outcome.CAMPAIGN_BROKEN),
    (131005, 403, Outcome.CAMPAIGN_BROKEN),
    (368, 403, Outcome.CAMPAIGN_BROKEN),
    (131031, 403, Outcome.CAMPAIGN_BROKEN),
    (130497, 400, Outcome.PERMANENT),
    (131042, 400, Outcome.CAMPAIGN_BROKEN),
    (131045, 500, Outcome.CAMPAIGN_BROKEN),
    (133010, 400, Outcome.CAMPAIGN_BROKEN),
    (131037, 400, Outcome.CAMPAIGN_BROKEN),
    (131063, 400, Outcome.CAMPAIGN_BROKEN),
    # 2026 Marketing Messages codes (shared/meta-2026.md §1.1, §1.5, §6): whatsblast sends
    # through /messages, where each means the campaign's set-up is wrong for everyone.
    (131055, 400, Outcome.CAMPAIGN_BROKEN),
    (131061, 400, Outcome.CAMPAIGN_BROKEN),
    (1, 400, Outcome.TRANSIENT),
    (2, 503, Outcome.TRANSIENT),
    (131000, 500, Outcome.TRANSIENT),
    (131016, 500, Outcome.TRANSIENT),
    (133004, 503, Outcome.TRANSIENT),
]


@pytest.mark.parametrize(("code", "http_status", "expected"), DOCUMENTED)
def test_documented_code(code: int, http_status: int, expected: Outcome) -> None:
    assert classify(error(code, http_status=http_status)) is expected


def test_table_covers_every_mapped_code() -> None:
    assert set(CODE_OUTCOMES) <= {code for code, _, _ in DOCUMENTED}


def test_accepted_is_sent() -> None:
    accepted = Accepted(wamid="wamid.X", wa_id="1", message_status="accepted", latency_s=0.2)
    assert classify(accepted) is Outcome.SENT


@pytest.mark.parametrize(
    ("http_status", "reached", "expected"),
    [
        (None, False, Outcome.TRANSIENT),  # refused, DNS, connect timeout
        (None, True, Outcome.AMBIGUOUS),  # read timeout, reset after sending
        (200, True, Outcome.AMBIGUOUS),  # 200 without a message id
        (429, True, Outcome.THROTTLED),
        (500, True, Outcome.TRANSIENT),
        (502, True, Outcome.TRANSIENT),
        (503, True, Outcome.TRANSIENT),
        (504, True, Outcome.AMBIGUOUS),  # a gateway gave up; Meta may have processed it
        (401, True, Outcome.CAMPAIGN_BROKEN),
        (404, True, Outcome.CAMPAIGN_BROKEN),
    ],
)
def test_without_a_meta_code(http_status: int | None, reached: bool, expected: Outcome) -> None:
    assert classify(error(None, http_status=http_status, reached=reached)) is expected


def test_wait_hints() -> None:
    assert wait_hint_s(error(131049)) == 24 * 3600
    assert wait_hint_s(error(131057)) == 60
    assert wait_hint_s(error(130429, retry_after=3.5)) == 3.5
    assert wait_hint_s(error(131026)) is None


statuses = st.one_of(st.none(), st.integers(min_value=100, max_value=599))
codes = st.one_of(st.none(), st.integers(min_value=-(2**31), max_value=2**31))


@given(code=codes, http_status=statuses, reached=st.booleans())
def test_classify_never_raises_and_returns_an_outcome(code, http_status, reached) -> None:
    assert classify(error(code, http_status=http_status, reached=reached)) in set(Outcome)


@given(
    code=st.integers(min_value=-(2**31), max_value=2**31).filter(
        lambda c: c not in CODE_OUTCOMES and not 200 <= c <= 299
    ),
    http_status=statuses,
    reached=st.booleans(),
)
def test_unknown_codes_take_the_safe_default(code, http_status, reached) -> None:
    assert classify(error(code, http_status=http_status, reached=reached)) is UNKNOWN_CODE_OUTCOME
    assert UNKNOWN_CODE_OUTCOME is Outcome.CAMPAIGN_BROKEN


@given(code=st.sampled_from(sorted(TRANSIENT_CODES)), http_status=statuses)
def test_transient_codes_are_transient_whatever_the_http_status(code, http_status) -> None:
    assert classify(error(code, http_status=http_status)) is Outcome.TRANSIENT


@given(code=st.sampled_from(sorted(CODE_OUTCOMES)), http_status=statuses, reached=st.booleans())
def test_the_code_decides_not_the_http_status(code, http_status, reached) -> None:
    result = error(code, http_status=http_status, reached=reached)
    assert classify(result) is CODE_OUTCOMES[code]


# --- Meta's error bodies as published ---------------------------------------------------

SEND_ERRORS = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "send_errors"


def send_error(name: str, *, http_status: int = 400) -> ApiError:
    body = (SEND_ERRORS / f"{name}.json").read_bytes()
    result = parse_response(status=http_status, body=body, headers={}, latency_s=0.01)
    assert isinstance(result, ApiError)
    return result


@pytest.mark.parametrize(
    ("name", "http_status", "expected"),
    [
        ("meta_doc_130429_rate_limit", 400, Outcome.THROTTLED),
        ("meta_doc_100_invalid_parameter", 400, Outcome.CAMPAIGN_BROKEN),
        ("heyoo_issue94_131030_not_in_allowed_list", 400, Outcome.CAMPAIGN_BROKEN),
        ("tawn33y_issue57_132001_template_missing", 404, Outcome.CAMPAIGN_BROKEN),
        ("pywa_190_expired_token", 401, Outcome.CAMPAIGN_BROKEN),
        ("whatsapp_api_js_190_cannot_parse_token", 401, Outcome.CAMPAIGN_BROKEN),
        ("courier_131056_pair_rate_minimal", 403, Outcome.PAIR_LIMITED),
    ],
)
def test_published_error_bodies(name: str, http_status: int, expected: Outcome) -> None:
    assert classify(send_error(name, http_status=http_status)) is expected


@pytest.mark.parametrize(
    ("code", "message"),
    [
        # 360dialog's expected-errors page quotes "(#131055) Method not allowed".
        (131055, "(#131055) Method not allowed"),
        # meta-cloud-api docs/marketing-messages.md names the code, not its title.
        (131061, "(#131061)"),
    ],
)
def test_marketing_messages_codes_stop_the_campaign(code: int, message: str) -> None:
    """No published body carries these codes: Meta's documented 100 envelope (error_data,
    fbtrace_id) with only its code and message changed, as the README's "Not found" notes."""
    envelope = json.loads((SEND_ERRORS / "meta_doc_100_invalid_parameter.json").read_text())
    envelope["error"]["code"] = code
    envelope["error"]["message"] = message
    result = parse_response(
        status=400, body=json.dumps(envelope).encode(), headers={}, latency_s=0.01
    )
    assert isinstance(result, ApiError) and result.code == code
    assert classify(result) is Outcome.CAMPAIGN_BROKEN
    assert wait_hint_s(result) is None
