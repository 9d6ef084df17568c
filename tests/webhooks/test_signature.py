"""X-Hub-Signature-256 over the raw bytes, and the GET handshake, as pure functions."""

from __future__ import annotations

import json

from tests.webhooks.support import APP_SECRET, fixture_bytes, sign
from webhooks.signature import handshake_challenge, signature_compute, signature_is_valid


def test_a_signature_over_the_raw_bytes_is_valid() -> None:
    body = fixture_bytes("status_sent")
    assert signature_is_valid(body=body, header=sign(body), secret=APP_SECRET) is True
    assert signature_compute(body=body, secret=APP_SECRET) == sign(body)


def test_a_signature_with_another_secret_is_invalid() -> None:
    body = fixture_bytes("status_sent")
    assert signature_is_valid(body=body, header=sign(body, "other"), secret=APP_SECRET) is False


def test_missing_empty_and_wrongly_prefixed_headers_are_invalid() -> None:
    body = fixture_bytes("status_sent")
    digest = sign(body).removeprefix("sha256=")
    for header in (None, "", "sha256=", digest, "sha1=" + digest, "SHA256=" + digest):
        assert signature_is_valid(body=body, header=header, secret=APP_SECRET) is False


def test_a_signature_over_a_reserialised_body_does_not_match_the_raw_bytes() -> None:
    # Meta escapes "/" and non-ASCII characters; json.loads + json.dumps gives other bytes.
    raw = fixture_bytes("inbound_text")
    assert b"\\/" in raw and b"\\u00c7" in raw
    reserialised = json.dumps(json.loads(raw), ensure_ascii=False).encode()
    assert signature_is_valid(body=raw, header=sign(reserialised), secret=APP_SECRET) is False
    assert signature_is_valid(body=reserialised, header=sign(raw), secret=APP_SECRET) is False


def test_non_ascii_junk_in_the_header_is_invalid_not_an_error() -> None:
    body = b"{}"
    assert signature_is_valid(body=body, header="sha256=\u00e9\u00e9", secret=APP_SECRET) is False


def test_no_secret_means_nothing_is_valid() -> None:
    body = b"{}"
    assert signature_is_valid(body=body, header=sign(body, ""), secret="") is False


def test_the_handshake_echoes_the_challenge_for_the_right_token() -> None:
    assert (
        handshake_challenge(mode="subscribe", token="t", challenge="1158201444", verify_token="t")
        == "1158201444"
    )


def test_the_handshake_refuses_a_wrong_token_mode_or_missing_configuration() -> None:
    cases = [
        dict(mode="subscribe", token="wrong", challenge="1", verify_token="t"),
        dict(mode="unsubscribe", token="t", challenge="1", verify_token="t"),
        dict(mode=None, token="t", challenge="1", verify_token="t"),
        dict(mode="subscribe", token=None, challenge="1", verify_token="t"),
        dict(mode="subscribe", token="t", challenge="", verify_token="t"),
        dict(mode="subscribe", token="", challenge="1", verify_token=None),
        dict(mode="subscribe", token="t", challenge="9" * 10_000, verify_token="t"),
    ]
    for case in cases:
        assert handshake_challenge(**case) is None, case
