"""Every webhook test runs with a known app secret and verify token."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from tests.webhooks.support import APP_SECRET, VERIFY_TOKEN


@pytest.fixture(autouse=True)
def webhook_settings(settings: Any) -> Any:
    settings.WHATSAPP_APP_SECRET = APP_SECRET
    settings.WHATSAPP_VERIFY_TOKEN = VERIFY_TOKEN
    return settings


@pytest.fixture
def table_lock() -> Iterator[threading.Event]:
    """Hold an exclusive lock on the events table from another connection until set: a
    slow or stalled database, as the web process's committers see it."""
    release = threading.Event()
    locked = threading.Event()
    params = connection.get_connection_params()

    def hold() -> None:
        with psycopg.connect(**params) as other, other.cursor() as cursor:
            cursor.execute("LOCK TABLE webhooks_webhookevent IN EXCLUSIVE MODE")
            locked.set()
            release.wait(30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert locked.wait(10)
    yield release
    release.set()
    holder.join(10)
