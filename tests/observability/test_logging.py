"""Structured logs: one JSON object per line, phone numbers masked, secrets never written."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from whatsblast.core.logging import (
    JsonFormatter,
    PhoneMaskFilter,
    SecretRedactFilter,
    logging_config,
    phone_mask,
)
from whatsblast.core.processes import service_environment

BASE_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture
def json_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger writing through the production handler chain into a buffer."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(SecretRedactFilter())
    handler.addFilter(PhoneMaskFilter())
    logger = logging.getLogger("tests.observability.json")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    yield logger, stream
    logger.removeHandler(handler)


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_phone_mask_keeps_country_area_and_last_four() -> None:
    assert phone_mask("+5511912341234") == "+55119****1234"
    assert phone_mask("+15550001234") == "+1555***1234"
    assert phone_mask("+4912345678") == "+491***5678"


def test_each_record_is_one_json_object_with_the_ids_passed_as_extra(json_log) -> None:
    logger, stream = json_log
    logger.info(
        "sent %s messages", 3, extra={"campaign_id": 7, "message_id": 42, "phone_number_id": "pn1"}
    )
    logger.warning("second line")
    first, second = lines(stream)
    assert first["message"] == "sent 3 messages"
    assert first["level"] == "INFO"
    assert first["logger"] == "tests.observability.json"
    assert (first["campaign_id"], first["message_id"], first["phone_number_id"]) == (7, 42, "pn1")
    assert first["ts"].endswith("+00:00") and "T" in first["ts"]
    assert second["level"] == "WARNING" and "campaign_id" not in second


def test_phone_numbers_are_masked_in_message_arguments_extras_and_tracebacks(json_log) -> None:
    logger, stream = json_log
    logger.info("to %s and +4915112345678", "+5511912341234", extra={"to": "+5511987654321"})
    try:
        raise ValueError("bad recipient +5511955556666")
    except ValueError:
        logger.exception("send failed")
    text = stream.getvalue()
    for raw in ("+5511912341234", "+4915112345678", "+5511987654321", "+5511955556666"):
        assert raw not in text
    first, second = lines(stream)
    assert first["message"] == "to +55119****1234 and +49151****5678"
    assert first["to"] == "+55119****4321"
    assert "ValueError: bad recipient +55119****6666" in second["exc"]


def test_ids_that_are_only_digits_are_left_alone(json_log) -> None:
    logger, stream = json_log
    logger.info("number 106540352242922 wamid wamid.HBgLMTU1NTA=")
    assert lines(stream)[0]["message"] == "number 106540352242922 wamid wamid.HBgLMTU1NTA="


@override_settings(
    WHATSAPP_APP_SECRET="app-secret-value-1234", WHATSAPP_VERIFY_TOKEN="verify-me-9876"
)
def test_tokens_and_configured_secrets_are_redacted(json_log) -> None:
    logger, stream = json_log
    logger.warning("header Authorization: Bearer abc.DEF-123_xyz")
    logger.warning("token EAAGm0PX4ZCpsBAKZAZCZAZBZCZAZBZCZAZBZCZA in a message")
    logger.warning("secret %s and verify %s", "app-secret-value-1234", "verify-me-9876")
    logger.warning("GET /webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=guess&x=1")
    logger.warning("redis://:hunter2hunter2@cache:6379/0 unreachable")
    text = stream.getvalue()
    for secret in (
        "abc.DEF-123_xyz",
        "EAAGm0PX4ZCpsBAKZAZCZAZBZCZAZBZCZAZBZCZA",
        "app-secret-value-1234",
        "verify-me-9876",
        "guess",
        "hunter2hunter2",
    ):
        assert secret not in text
    messages = [line["message"] for line in lines(stream)]
    assert messages[0] == "header Authorization: Bearer [REDACTED]"
    assert messages[3].endswith("hub.verify_token=[REDACTED]&x=1")
    assert messages[4].startswith("redis://:[REDACTED]@cache:6379/0")


def test_a_bad_log_format_fails_at_start() -> None:
    with pytest.raises(ImproperlyConfigured, match="LOG_FORMAT"):
        logging_config(log_format="xml", level="INFO")
    with pytest.raises(ImproperlyConfigured, match="LOG_LEVEL"):
        logging_config(log_format="json", level="LOUD")


def test_a_management_command_logs_json_lines_when_asked(settings) -> None:
    """The settings wiring: LOG_FORMAT=json makes every line of a real process parse."""
    code = (
        "import logging; log = logging.getLogger('delivery.engine.sender'); "
        "log.warning('throttled for %s', '+5511912341234', extra={'campaign_id': 5}); "
        "logging.getLogger('django.request').error('Service Unavailable: /readyz')"
    )
    env = {
        **os.environ,
        "LOG_FORMAT": "json",
        "DEBUG": "1",
        **service_environment(),
        "SECRET_KEY": "a-secret-key-that-must-not-appear-anywhere-0123456789",
    }
    done = subprocess.run(  # noqa: S603
        [sys.executable, str(BASE_DIR / "manage.py"), "shell", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    records = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    assert [r["logger"] for r in records] == ["delivery.engine.sender", "django.request"]
    assert records[0]["message"] == "throttled for +55119****1234"
    assert records[0]["campaign_id"] == 5
    assert "a-secret-key-that-must-not-appear" not in done.stderr
