"""The cast of the admin UI tests: one user per role, and dead letters to decide."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from campaigns.models import Campaign
from delivery.models import DeadLetter, Message
from tests.factories import make_campaign, make_message
from whatsblast.auth.roles import MARKETING, OPERATORS, SUPPORT, roles_sync

PASSWORD = "correct-horse-battery-staple"  # noqa: S105

ROLE_USERS = {MARKETING: "mia", SUPPORT: "sam", OPERATORS: "otto"}


def role_user(role: str, username: str | None = None) -> Any:
    """A staff user whose only rights come from the role's group (made by the migration)."""
    if not Group.objects.filter(name=role).exists():
        roles_sync()  # a transactional test's flush took the migration's groups away
    user = get_user_model().objects.create_user(
        username or ROLE_USERS[role], password=PASSWORD, is_staff=True
    )
    user.groups.add(Group.objects.get(name=role))
    return user


SUPERUSER = "superuser"


def role_or_superuser(role: str) -> Any:
    """A user of the role, or for ``SUPERUSER`` a superuser (the case that hides most)."""
    if role == SUPERUSER:
        return get_user_model().objects.create_superuser("root", password=PASSWORD)
    return role_user(role)


def dead_message(campaign: Campaign | None = None, **fields: Any) -> DeadLetter:
    """A message whose retries ran out, with its dead-letter entry, as the engine leaves them."""
    campaign = campaign or make_campaign(status="completed")
    history = [
        {
            "at": f"2026-11-30T10:0{i}:00+00:00",
            "attempt": i + 1,
            "outcome": "transient",
            "http_status": 500,
            "code": 131000,
            "title": "Something went wrong",
            "details": f"attempt {i + 1} failed",
        }
        for i in range(3)
    ]
    message = make_message(
        campaign=campaign,
        status="dead",
        attempt=3,
        params={"body": ["Ana"]},
        last_error_code=131000,
        last_error_title="Something went wrong",
        error_history=history,
        **fields,
    )
    return DeadLetter.objects.create(
        message=message,
        campaign=campaign,
        phone_number=campaign.phone_number,
        error_code=131000,
        error_title="Something went wrong",
        attempts=history,
        payload={"to": message.to},
    )


def message_status(letter: DeadLetter) -> str:
    return str(Message.objects.values_list("status", flat=True).get(pk=letter.message_id))
