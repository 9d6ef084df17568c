"""Read-only queries over the webhook tables, for metrics, the admin and campaign pages."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import (
    Count,
    Exists,
    F,
    IntegerField,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import Coalesce, NullIf
from django.utils import timezone

from delivery.models import Message
from webhooks.models import InboundMessage, UnmatchedStatus, WebhookEvent, WebhookEventStatus


def webhook_stats() -> dict[str, float | int]:
    """Backlog and problems: what an operator watches during a peak."""
    events = WebhookEvent.objects.aggregate(
        pending=Count("id", filter=Q(status=WebhookEventStatus.PENDING)),
        failed=Count("id", filter=Q(status=WebhookEventStatus.FAILED)),
        rejected=Count("id", filter=Q(status=WebhookEventStatus.REJECTED)),
        oldest_pending=Min("received_at", filter=Q(status=WebhookEventStatus.PENDING)),
    )
    unmatched = UnmatchedStatus.objects.aggregate(
        waiting=Count("id", filter=Q(reported_at__isnull=True)),
        reported=Count("id", filter=Q(reported_at__isnull=False)),
    )
    oldest = events["oldest_pending"]
    return {
        "events_pending": events["pending"],
        "events_failed": events["failed"],
        "events_rejected": events["rejected"],
        "apply_lag_seconds": (timezone.now() - oldest).total_seconds() if oldest else 0.0,
        "unmatched_waiting": unmatched["waiting"],
        "unmatched_reported": unmatched["reported"],
    }


def campaign_reply_counts(*, campaign_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Replies and opt-outs per campaign: {campaign id: {"replies": n, "opt_outs": m}}."""
    rows = (
        InboundMessage.objects.filter(campaign_id__in=list(campaign_ids))
        .values("campaign_id")
        .annotate(replies=Count("id"), opt_outs=Count("id", filter=Q(is_opt_out=True)))
    )
    return {
        row["campaign_id"]: {"replies": row["replies"], "opt_outs": row["opt_outs"]} for row in rows
    }


def _sender() -> Coalesce:
    """Who wrote: the phone, or the user id of a sender who shares none."""
    return Coalesce(NullIf(F("from_phone"), Value("")), F("from_user_id"))


def _from_recipient() -> Q:
    """Inbound messages from a ``delivery.Message``'s recipient: its ``to`` is the phone, or
    the user id of a contact known by it alone."""
    return Q(from_phone=OuterRef("to")) | Q(from_user_id=OuterRef("to"))


def campaign_replier_counts(*, campaign_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Recipients who replied and who opted out, per campaign, each person counted once:
    {campaign id: {"replied": n, "opted_out": m}} (one grouped query over the inbound
    campaign index)."""
    rows = (
        InboundMessage.objects.filter(campaign_id__in=list(campaign_ids))
        .values("campaign_id")
        .annotate(
            replied=Count(_sender(), distinct=True),
            opted_out=Count(_sender(), distinct=True, filter=Q(is_opt_out=True)),
        )
        .order_by()
    )
    return {
        row["campaign_id"]: {"replied": row["replied"], "opted_out": row["opted_out"]}
        for row in rows
    }


def message_replies_expression() -> Coalesce:
    """For a query over ``delivery.Message``: how many replies its recipient sent to its
    campaign (the inbound messages the applier tied to the campaign, from that phone)."""
    replies = (
        InboundMessage.objects.filter(_from_recipient(), campaign_id=OuterRef("campaign_id"))
        .order_by()
        .values("campaign_id")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(replies, output_field=IntegerField()), 0)


def message_opted_out_expression() -> Exists:
    """For a query over ``delivery.Message``: whether its recipient opted out in a reply
    to its campaign."""
    return Exists(
        InboundMessage.objects.filter(
            _from_recipient(), campaign_id=OuterRef("campaign_id"), is_opt_out=True
        )
    )


@dataclass(frozen=True)
class Reply:
    """One inbound message tied to a campaign, as the campaign's pages show it."""

    id: int
    sent_at: datetime
    type: str
    text: str
    button_payload: str
    from_phone: str
    from_user_id: str
    profile_name: str
    contact_id: int | None
    contact_name: str
    is_opt_out: bool
    # The campaign's message to this recipient: the one they replied to.
    message_id: int | None
    message_status: str

    @property
    def sender(self) -> str:
        return self.from_phone or self.from_user_id

    @property
    def name(self) -> str:
        return self.contact_name or self.profile_name


def _replies(queryset: QuerySet[InboundMessage], start: int, stop: int) -> list[Reply]:
    # The campaign's message to the sender, through the (campaign, to) unique index.
    answered = Message.objects.filter(
        Q(to=OuterRef("from_phone")) | Q(to=OuterRef("from_user_id")),
        campaign_id=OuterRef("campaign_id"),
    ).order_by()
    rows = queryset.annotate(
        message_id=Subquery(answered.values("id")[:1]),
        message_status=Subquery(answered.values("status")[:1]),
        contact_name=Coalesce(F("contact__name"), Value("")),
    ).values(
        "id",
        "sent_at",
        "type",
        "text",
        "button_payload",
        "from_phone",
        "from_user_id",
        "profile_name",
        "contact_id",
        "contact_name",
        "is_opt_out",
        "message_id",
        "message_status",
    )[start:stop]
    replies: list[Reply] = []
    for row in rows:
        values: dict[str, Any] = dict(row)
        values["message_status"] = values["message_status"] or ""
        replies.append(Reply(**values))
    return replies


def campaign_replies(*, campaign_id: int, offset: int = 0, limit: int = 50) -> list[Reply]:
    """A page of the campaign's replies, newest first (the inbound campaign index walked
    backwards: a page costs its rows, whatever the campaign's size)."""
    queryset = InboundMessage.objects.filter(campaign_id=campaign_id).order_by("-sent_at", "-id")
    return _replies(queryset, offset, offset + limit)


def message_replies(*, campaign_id: int | None, to: str, limit: int = 20) -> list[Reply]:
    """What the recipient of a campaign message wrote back to that campaign, newest first."""
    if campaign_id is None or not to:
        return []
    queryset = (
        InboundMessage.objects.filter(campaign_id=campaign_id)
        .filter(Q(from_phone=to) | Q(from_user_id=to))
        .order_by("-sent_at", "-id")
    )
    return _replies(queryset, 0, limit)
