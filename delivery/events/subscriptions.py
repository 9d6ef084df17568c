"""Subscriptions: create one (its secret returned once), pause, resume, delete, replay its
dead letters, and send it a test event."""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from delivery.events.deliverer import body_of, events_json_of, post_signed
from delivery.events.destinations import host_refusal
from delivery.events.types import event_types_errors
from delivery.models import ApiKey, Event, EventDeadLetter, EventSubscription

SECRET_PREFIX = "whsec_"  # noqa: S105 (the prefix of a generated secret, not one)


def host_name_valid(host: str) -> bool:
    """A name DNS can hold (RFC 1035: labels of 1-63 octets, 253 characters in all), or an
    address literal."""
    name = host.removesuffix(".")
    if ":" in name:  # an IPv6 literal
        return True
    return 0 < len(name) <= 253 and all(0 < len(label) <= 63 for label in name.split("."))


def url_errors(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        return "An http:// or https:// URL with a host."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "An http:// or https:// URL with a host."
    if len(url) > 2000:
        return "At most 2,000 characters."
    if not host_name_valid(parts.hostname):
        return "The host is not a name DNS can hold: labels of 1 to 63 characters, 253 in all."
    refusal = host_refusal(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    if refusal:
        return f"Events go to public addresses only: {refusal}."
    return None


def subscription_create(
    *,
    name: str,
    url: str,
    event_types: list[str] | None = None,
    api_key: ApiKey | None = None,
    from_now: bool = True,
) -> tuple[EventSubscription, str]:
    """A subscription and its signing secret (shown once). It receives events from now on
    (``from_now``), not the backlog other subscriptions already have."""
    errors: dict[str, str] = {}
    if not name.strip():
        errors["name"] = "A subscription needs a name."
    url_error = url_errors(url)
    if url_error:
        errors["url"] = url_error
    types_error = event_types_errors(event_types or [])
    if types_error:
        errors["event_types"] = types_error
    if errors:
        raise ValidationError(errors)
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        last = Event.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
        subscription = EventSubscription.objects.create(
            name=name.strip(),
            url=url,
            secret=secret,
            event_types=sorted(set(event_types or [])),
            api_key=api_key,
            cursor=last if from_now else 0,
        )
    return subscription, secret


def subscription_pause(*, subscription: EventSubscription, reason: str = "paused by hand") -> None:
    EventSubscription.objects.filter(pk=subscription.pk).update(active=False, paused_reason=reason)


def subscription_resume(*, subscription: EventSubscription) -> None:
    """Deliveries start again at once, from where the subscription stopped."""
    EventSubscription.objects.filter(pk=subscription.pk).update(
        active=True,
        paused_reason="",
        failing_since=None,
        attempts=0,
        next_attempt_at=timezone.now(),
    )


@dataclass(frozen=True)
class Replay:
    events: int
    error: str  # "" when the receiver took them


def dead_letters_replay(*, subscription: EventSubscription, ids: list[int] | None = None) -> Replay:
    """Send the subscription's dead letters not yet replayed (or those ``ids``) again, in
    order, in one signed batch, with their original event ids."""
    letters = EventDeadLetter.objects.filter(subscription=subscription, replayed_at__isnull=True)
    if ids is not None:
        letters = letters.filter(pk__in=ids)
    chosen = list(letters.order_by("event_id").values_list("pk", "event_id")[:1000])
    if not chosen:
        return Replay(0, "")
    body = body_of(subscription.pk, events_json_of([seq for _, seq in chosen]))
    error = post_signed(subscription.url, subscription.secret.reveal(), body)
    if error:
        EventDeadLetter.objects.filter(pk__in=[pk for pk, _ in chosen]).update(last_error=error)
    else:
        EventDeadLetter.objects.filter(pk__in=[pk for pk, _ in chosen]).update(
            replayed_at=timezone.now()
        )
    return Replay(len(chosen), error)


# The type of the test event: not one a subscription chooses, not from the outbox.
PING_TYPE = "ping"


def subscription_ping(*, subscription: EventSubscription) -> str:
    """Send the subscription one signed test event now, paused or not, as a batch like any
    other: ``{"type": "ping", "sequence": 0, ...}`` under a fresh id, outside the line (its
    cursor, backoff and dead letters untouched). "" when the receiver answered 2xx, else
    what went wrong."""
    event = {
        "id": str(uuid.uuid4()),
        "type": PING_TYPE,
        "sequence": 0,
        "occurred_at": timezone.now().isoformat(),
        "message_id": None,
        "data": {"subscription": subscription.name},
    }
    body = body_of(subscription.pk, json.dumps(event, separators=(",", ":")))
    return post_signed(subscription.url, subscription.secret.reveal(), body)
