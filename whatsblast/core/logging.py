"""Log output: one JSON object per line (``LOG_FORMAT=json``) or plain text, always scrubbed.

Two filters sit on every handler (a logger's own filters would miss records propagated
from child loggers):

- ``PhoneMaskFilter`` masks E.164 numbers (``+5511912341234`` -> ``+55119****1234``) in the
  message, the traceback and string ``extra`` fields: recipients are personal data and
  logs travel further than the database.
- ``SecretRedactFilter`` replaces bearer tokens, Meta access tokens, URL passwords, the
  webhook verify token in a query string, and the literal values of the settings named in
  ``SECRET_SETTINGS``, wherever they appear.

``JsonFormatter`` writes ``ts``, ``level``, ``logger``, ``message``, ``pid`` and every
``extra=`` field (``campaign_id``, ``message_id``, ``phone_number_id``, ...), plus ``exc``
for a traceback.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

# Settings (and environment variables of the same name) whose values never reach a log.
SECRET_SETTINGS = ("SECRET_KEY", "WHATSAPP_APP_SECRET", "WHATSAPP_VERIFY_TOKEN")
# URLs whose password is a secret.
URL_SETTINGS = ("DATABASE_URL", "REDIS_URL")
# Shorter values are not redacted literally: "1" or "abc" would mangle every line.
MIN_SECRET_LENGTH = 8
REDACTED = "[REDACTED]"

# "+" then 8-15 digits, not glued to other digits or word characters: E.164 as stored.
_E164 = re.compile(r"(?<![\w+])\+([1-9]\d{7,14})(?!\d)")
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+")
# Meta's user and system-user access tokens start with EAA.
_META_TOKEN = re.compile(r"\bEAA[A-Za-z0-9]{20,}")
_TOKEN_PARAM = re.compile(r"(?i)\b(access_token|hub\.verify_token|token|password)=[^&\s\"']+")
_URL_PASSWORD = re.compile(r"(?i)([a-z][a-z0-9+.-]*://[^/\s:@]*):[^@\s/]+@")

_RECORD_FIELDS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys() | {"message", "asctime", "taskName"}
)


def phone_mask(number: str) -> str:
    """``+5511912341234`` -> ``+55119****1234``: country and area kept, at least 3 hidden."""
    digits = number.lstrip("+")
    head = max(1, min(5, len(digits) - 7))
    hidden = len(digits) - head - 4
    return f"+{digits[:head]}{'*' * hidden}{digits[-4:]}"


def phones_mask(text: str) -> str:
    return _E164.sub(lambda match: phone_mask(match.group(0)), text)


def _secret_values() -> Iterator[str]:
    """The literal secrets to redact: from settings once configured, else the environment.

    Settings are only read when already configured: a log line in a process that never
    set Django up (the gunicorn master) must not import the settings module.
    """
    from django.conf import settings

    configured = settings.configured
    for name in SECRET_SETTINGS:
        value = getattr(settings, name, None) if configured else os.environ.get(name)
        if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH:
            yield value
    for name in URL_SETTINGS:
        url = getattr(settings, name, None) if configured else os.environ.get(name)
        if not isinstance(url, str):
            continue
        try:
            password = urlsplit(url).password
        except ValueError:
            continue
        if password and len(password) >= MIN_SECRET_LENGTH:
            yield password


def secrets_redact(text: str) -> str:
    text = _BEARER.sub(rf"\1 {REDACTED}", text)
    text = _META_TOKEN.sub(REDACTED, text)
    text = _TOKEN_PARAM.sub(rf"\1={REDACTED}", text)
    text = _URL_PASSWORD.sub(rf"\1:{REDACTED}@", text)
    for secret in _secret_values():
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact(text: str) -> str:
    """Both scrubs at once: for text that leaves the process (logs, health details)."""
    return phones_mask(secrets_redact(text))


def _record_scrub(record: logging.LogRecord, scrub: Callable[[str], str]) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string is reported by the handler, not here
        message = str(record.msg)
    record.msg, record.args = scrub(message), None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = scrub(record.exc_text)
    if record.stack_info:
        record.stack_info = scrub(record.stack_info)
    for key, value in list(vars(record).items()):
        if key not in _RECORD_FIELDS and isinstance(value, str):
            setattr(record, key, scrub(value))


class PhoneMaskFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        _record_scrub(record, phones_mask)
        return True


class SecretRedactFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        _record_scrub(record, secrets_redact)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and key not in payload:
                payload[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            payload["exc"] = record.exc_text
        if record.stack_info:
            payload["stack"] = record.stack_info
        return json.dumps(payload, ensure_ascii=False, default=str)


class ForbiddenWithoutTracebackFilter(logging.Filter):
    """A refused request (403) is one warning line, not a traceback: the refusal is the
    permission system doing its job, and its stack says nothing an operator can use."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """Django's ``LOGGING``: everything through one scrubbed console handler on the root.

    Django's own ``django`` logger is emptied so its records reach the root handler
    (otherwise DEBUG would print them twice, once not as JSON); RQ's worker logger finds
    the root handler and adds none of its own.
    """
    from django.core.exceptions import ImproperlyConfigured

    log_format = log_format.strip().lower()
    if log_format not in LOG_FORMATS:
        raise ImproperlyConfigured(f"LOG_FORMAT={log_format!r} must be one of {LOG_FORMATS}")
    level = level.strip().upper()
    if not isinstance(logging.getLevelName(level), int):
        raise ImproperlyConfigured(f"LOG_LEVEL={level!r} is not a logging level")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "mask_phones": {"()": "whatsblast.core.logging.PhoneMaskFilter"},
            "redact_secrets": {"()": "whatsblast.core.logging.SecretRedactFilter"},
            "forbidden_quiet": {"()": "whatsblast.core.logging.ForbiddenWithoutTracebackFilter"},
        },
        "formatters": {
            "json": {"()": "whatsblast.core.logging.JsonFormatter"},
            "text": {"format": TEXT_FORMAT},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["redact_secrets", "mask_phones"],
            },
        },
        "loggers": {
            "django": {"handlers": [], "level": level, "propagate": True},
            "django.server": {"handlers": [], "level": level, "propagate": True},
            "django.request": {
                "handlers": [],
                "level": level,
                "propagate": True,
                "filters": ["forbidden_quiet"],
            },
        },
        "root": {"handlers": ["console"], "level": level},
    }
