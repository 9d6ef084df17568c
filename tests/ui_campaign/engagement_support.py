"""A launched A/B test's results, built directly: the arms' messages, clicks (people's and
preview fetchers'), quick-reply taps, conversions and a holdout, for the report's tests.

The figures, as the report should read them:

- arm A (variant 0): 10 sent (6 delivered, 4 read), 3 people clicked (4 taps; 2 preview
  fetches besides), 1 conversion (30 BRL, delivered);
- arm B (variant 1): 10 sent (5 delivered, 5 read), 6 people clicked (6 taps),
  2 conversions (100 + 50 BRL, clicked);
- holdout: 5 contacts not sent, 1 of them converted (a control conversion, no revenue);
- quick replies: "Yes, I want it" tapped 3 times by 2 people, "Stop promotions" once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from campaigns.models import AbState, Campaign, CampaignStatus, Contact
from delivery.campaigns.skips import HOLDOUT
from delivery.models import Click, Conversion, Message
from tests.factories import make_contact, make_message
from webhooks.models import InboundMessage

ARM_STATUSES = {0: ["delivered"] * 6 + ["read"] * 4, 1: ["delivered"] * 5 + ["read"] * 5}
ARM_CLICKED = {0: (0, 0, 1, 2), 1: (0, 1, 2, 3, 4, 5)}  # message index per people's tap
PREVIEWS = 2  # on arm A's first message
HOLDOUT_ROWS = 5
YES, STOP = "Yes, I want it", "Stop promotions"

QUICK_REPLIES = [
    {"index": 1, "type": "QUICK_REPLY", "text": YES, "sub_type": "quick_reply", "param": "none"},
    {"index": 2, "type": "QUICK_REPLY", "text": STOP, "sub_type": "quick_reply", "param": "none"},
]


@dataclass
class Seeded:
    arms: dict[int, list[Message]] = field(default_factory=dict)
    holdout: list[Message] = field(default_factory=list)


def _contact(n: int) -> Contact:
    return make_contact(phone=f"+5511955{n:06d}", name=f"Person {n}", attributes={"city": "Rio"})


def _conversion(message: Message, *, value: str | None, by: str, key: str) -> Conversion:
    return Conversion.objects.create(
        contact_id=message.contact_id,
        phone=message.to,
        event="purchase",
        value=Decimal(value) if value is not None else None,
        currency="BRL" if value is not None else "",
        occurred_at=timezone.now(),
        source="api",
        dedupe_key=key,
        message=message,
        campaign_id=message.campaign_id,
        attributed_by=by,
    )


def seed_ab_results(campaign: Campaign, *, state: str = AbState.WAITING_PICK) -> Seeded:
    """``campaign`` launched five hours ago, its test at ``state``, with the results above."""
    now = timezone.now()
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.RUNNING, started_at=now - timedelta(hours=5), ab_state=state
    )
    campaign.refresh_from_db()
    seeded = Seeded()
    n = 0
    variants = {v.position: v for v in campaign.variants.select_related("template")}
    for position, statuses in ARM_STATUSES.items():
        rows = []
        for status in statuses:
            n += 1
            contact = _contact(n)
            rows.append(
                Message.objects.create(
                    campaign=campaign,
                    phone_number=campaign.phone_number,
                    next_attempt_at=now,
                    to=contact.phone,
                    contact=contact,
                    template=variants[position].template,
                    variant=position,
                    status=status,
                    sent_at=now - timedelta(hours=4),
                    delivered_at=now - timedelta(hours=4),
                    wamid=f"wamid.{campaign.pk}.{n}",
                )
            )
        seeded.arms[position] = rows
    for _ in range(HOLDOUT_ROWS):
        n += 1
        contact = _contact(n)
        seeded.holdout.append(
            make_message(
                campaign=campaign,
                to=contact.phone,
                contact=contact,
                status="skipped",
                skip_reason=HOLDOUT,
            )
        )
    for position, indices in ARM_CLICKED.items():
        for index in indices:
            _click(seeded.arms[position][index], preview=False)
    for _ in range(PREVIEWS):
        _click(seeded.arms[0][0], preview=True)
    a, b = seeded.arms[0], seeded.arms[1]
    _conversion(a[5], value="30.00", by="delivered", key=f"t:{campaign.pk}:a5")
    _conversion(b[0], value="100.00", by="clicked", key=f"t:{campaign.pk}:b0")
    _conversion(b[1], value="50.00", by="clicked", key=f"t:{campaign.pk}:b1")
    _conversion(seeded.holdout[0], value=None, by="holdout", key=f"t:{campaign.pk}:h0")
    for i, (message, text, payload) in enumerate(
        [(a[0], YES, "YES"), (a[0], YES, "YES"), (b[0], YES, "YES"), (b[1], STOP, "STOP")]
    ):
        _tap(message, text=text, payload=payload, n=i)
    return seeded


def _click(message: Message, *, preview: bool) -> None:
    Click.objects.create(
        message=message,
        campaign_id=message.campaign_id,
        contact_id=message.contact_id,
        clicked_at=timezone.now(),
        is_preview=preview,
        user_agent="facebookexternalhit/1.1" if preview else "Mozilla/5.0 (Android 14)",
    )


def _tap(message: Message, *, text: str, payload: str, n: int) -> None:
    InboundMessage.objects.create(
        wamid=f"wamid.in.{message.pk}.{n}",
        from_phone=message.to,
        type="button",
        text=text,
        button_payload=payload,
        sent_at=timezone.now(),
        contact_id=message.contact_id,
        context_wamid=message.wamid,
        campaign_id=message.campaign_id,
        payload={},
    )


def short_template_fields() -> dict[str, Any]:
    """Variant B's template: one body param and a URL button carrying the tracked link."""
    return {
        "name": "spring_short",
        "body_text": "{{1}}, 20% off today only.",
        "body_examples": ["Asha"],
        "buttons": [
            {
                "index": 0,
                "type": "URL",
                "text": "Shop",
                "url": "https://go.example.com/c/{{1}}",
                "sub_type": "url",
                "param": "required",
                "example": "abc",
            }
        ],
    }
