"""Every webhook test runs with a known app secret and verify token."""

from __future__ import annotations

from typing import Any

import pytest

from tests.webhooks.support import APP_SECRET, VERIFY_TOKEN


@pytest.fixture(autouse=True)
def webhook_settings(settings: Any) -> Any:
    settings.WHATSAPP_APP_SECRET = APP_SECRET
    settings.WHATSAPP_VERIFY_TOKEN = VERIFY_TOKEN
    return settings
