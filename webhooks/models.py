"""Meta's callbacks, stored raw and durably before anything is parsed, and what they leave."""

from __future__ import annotations

from django.db import models


class WebhookEventStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    PROCESSED = "processed", "Processed"
    REJECTED = "rejected", "Rejected (malformed)"
    FAILED = "failed", "Failed to apply"


class WebhookEvent(models.Model):
    """One signed POST from Meta, exactly as received."""

    received_at = models.DateTimeField(auto_now_add=True)
    body = models.BinaryField()
    # SHA-256 of the raw body: a redelivered identical POST is recognised and stored once
    # (the unique constraint below; unique=True would add a LIKE index nothing uses, and
    # every POST pays for each index).
    body_sha256 = models.CharField(max_length=64)
    status = models.CharField(
        max_length=16, choices=WebhookEventStatus.choices, default=WebhookEventStatus.PENDING
    )
    error = models.TextField(blank=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    # What the applier found in it: {"statuses": {"sent": 2, "played": 1}, "messages": 1, ...}
    summary = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("-received_at",)
        indexes = [
            models.Index(
                fields=("received_at",),
                condition=models.Q(status="pending"),
                name="webhookevent_pending_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=("body_sha256",), name="webhookevent_body_sha256_uniq"),
        ]

    def __str__(self) -> str:
        return f"webhook event {self.pk} ({self.status})"


class UnmatchedStatus(models.Model):
    """A status callback that matched no message yet.

    Meta can call back before the sending worker has stored the wamid (and a status without
    ``biz_opaque_callback_data`` can only be matched by wamid), so such statuses are kept
    and retried by later applier runs. Past the retry window they are marked reported:
    kept for support, counted in the metrics, never dropped silently.
    """

    wamid = models.CharField(max_length=128)
    status = models.CharField(max_length=32)
    callback_data = models.CharField(max_length=512, blank=True)
    phone_number_id = models.CharField(max_length=64, blank=True)
    payload = models.JSONField()
    event = models.ForeignKey(
        WebhookEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    first_seen_at = models.DateTimeField()
    attempts = models.PositiveIntegerField(default=0)
    next_try_at = models.DateTimeField()
    reported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "unmatched status"
        verbose_name_plural = "unmatched statuses"
        ordering = ("-first_seen_at",)
        constraints = [
            # Meta redelivers; one row per (message, status) is enough evidence.
            models.UniqueConstraint(fields=("wamid", "status"), name="unmatched_status_unique"),
        ]
        indexes = [
            models.Index(
                fields=("next_try_at",),
                condition=models.Q(reported_at__isnull=True),
                name="unmatched_status_due_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"unmatched {self.status} for {self.wamid}"


class InboundMessage(models.Model):
    """A message a WhatsApp user sent to one of the business numbers."""

    wamid = models.CharField(max_length=128, unique=True)
    from_phone = models.CharField(
        max_length=32, blank=True, help_text="Sender in E.164 form (blank: no phone shared)"
    )
    from_user_id = models.CharField(
        max_length=140, blank=True, help_text="Sender's business-scoped user id"
    )
    type = models.CharField(max_length=32)
    text = models.TextField(blank=True, help_text="Text body, or a button's text")
    button_payload = models.CharField(max_length=512, blank=True)
    profile_name = models.CharField(max_length=200, blank=True)
    sent_at = models.DateTimeField(help_text="When the user sent it (Meta's timestamp)")
    received_at = models.DateTimeField(auto_now_add=True)
    phone_number = models.ForeignKey(
        "campaigns.PhoneNumber",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="inbound_messages",
    )
    contact = models.ForeignKey(
        "campaigns.Contact",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="inbound_messages",
    )
    # The wamid of the message this one answers (``context.id``): a quick-reply tap names
    # the template message tapped. No index: it is joined to delivery_message's unique
    # wamid, from the few inbound rows of one campaign.
    context_wamid = models.CharField(max_length=128, blank=True, db_default="")
    # The campaign of the message it answers (context_wamid), else the campaign that last
    # messaged this contact: the reply is counted there.
    campaign = models.ForeignKey(
        "campaigns.Campaign",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="replies",
    )
    is_opt_out = models.BooleanField(default=False)
    payload = models.JSONField()

    class Meta:
        ordering = ("-sent_at",)
        indexes = [
            models.Index(fields=("campaign", "sent_at"), name="inbound_campaign_idx"),
            models.Index(fields=("from_phone", "-sent_at"), name="inbound_from_idx"),
        ]

    def __str__(self) -> str:
        return f"inbound {self.type} from {self.from_phone or self.from_user_id}"


class AsyncError(models.Model):
    """A system error Meta reported out of band (``value.errors``), e.g. 130429."""

    event = models.ForeignKey(
        WebhookEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    phone_number_id = models.CharField(max_length=64, blank=True)
    code = models.IntegerField(null=True, blank=True)
    title = models.CharField(max_length=500, blank=True)
    message = models.TextField(blank=True)
    details = models.TextField(blank=True)
    payload = models.JSONField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-received_at",)
        indexes = [models.Index(fields=("code", "-received_at"), name="asyncerror_code_idx")]

    def __str__(self) -> str:
        return f"async error {self.code} on {self.phone_number_id or '?'}"


class MarketingClick(models.Model):
    """A click Meta reported on a Marketing Messages API send (``value.user_actions[]``).

    Meta's documented payload carries a click id and a tracking token but no wamid and no
    recipient, so a click is kept as Meta gave it, by its number; a later join may tie
    tokens to campaigns.
    """

    event = models.ForeignKey(
        WebhookEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    phone_number_id = models.CharField(max_length=64, blank=True)
    action_type = models.CharField(max_length=64)
    click_component = models.CharField(max_length=32, blank=True)  # cta | body
    product_id = models.CharField(max_length=200, blank=True)
    click_id = models.CharField(max_length=200, blank=True)
    tracking_token = models.CharField(max_length=500, blank=True)
    clicked_at = models.DateTimeField(null=True, blank=True)
    payload = models.JSONField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-received_at",)
        indexes = [
            models.Index(fields=("phone_number_id", "-received_at"), name="mmclick_number_idx"),
            models.Index(fields=("tracking_token",), name="mmclick_token_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action_type} on {self.phone_number_id or '?'}"
