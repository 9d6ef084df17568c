"""A support agent requeues a dead letter for a chosen time in a real browser, and finds
the decision on the entry's History page and under the home page's Recent actions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from delivery.models import Message
from tests.ui.browser.conftest import log_in, screenshot
from tests.ui.support import dead_message, role_user
from whatsblast.auth.roles import SUPPORT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]


def test_support_requeues_a_dead_letter_at_a_time_and_sees_it_in_the_history(
    wide: Any, live_server: Any
) -> None:
    role_user(SUPPORT)
    letter = dead_message()
    base = live_server.url
    at = (timezone.localtime() + timedelta(hours=2)).replace(second=0, microsecond=0)

    log_in(wide, base, "sam")
    wide.goto(f"{base}/admin/delivery/deadletter/{letter.pk}/change/")
    assert "3 attempts before it was dead-lettered" in wide.inner_text("#message-summary")
    wide.check("#requeue-form input[name=when][value=at]")
    wide.fill("#requeue-form input[name=at]", at.strftime("%Y-%m-%dT%H:%M"))
    wide.fill("#requeue-form textarea[name=note]", "After Meta's maintenance")
    screenshot(wide, "dead-letter-requeue-at-form.png", full_page=True)
    wide.click("#requeue-form input[type=submit]")

    assert "1 dead letter(s) requeued." in wide.inner_text(".messagelist")
    summary = wide.inner_text("#message-summary")
    assert f"due {at:%Y-%m-%d %H:%M}:00" in summary and "by sam" in summary
    assert "0 attempts since" in summary and "waiting to be sent" in summary
    assert wide.inner_text("#message-status") == "Pending"
    message = Message.objects.get(pk=letter.message_id)
    assert (message.status, message.next_attempt_at) == ("pending", at)
    screenshot(wide, "dead-letter-requeued-at.png", full_page=True)

    wide.click("#message-summary a.wb-history-link")
    wide.wait_for_url("**/history/")
    history = wide.inner_text("#content")
    assert "no change history" not in history.lower()
    assert "Requeued with fresh attempts, due" in history and "After Meta's maintenance" in history
    assert "sam" in history
    screenshot(wide, "dead-letter-history.png")

    wide.goto(f"{base}/admin/")
    recent = wide.inner_text("#recent-actions-module")
    assert f"dead letter for message {letter.message_id}" in recent
    screenshot(wide, "home-recent-actions.png")
