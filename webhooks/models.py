"""Meta's callbacks, stored raw and durably before anything is parsed."""

from __future__ import annotations

from django.db import models


class WebhookEventStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    PROCESSED = "processed", "Processed"
    REJECTED = "rejected", "Rejected (malformed)"


class WebhookEvent(models.Model):
    """One signed POST from Meta, exactly as received."""

    received_at = models.DateTimeField(auto_now_add=True)
    body = models.BinaryField()
    # SHA-256 of the raw body: a redelivered identical POST is recognised and stored once.
    body_sha256 = models.CharField(max_length=64, unique=True)
    status = models.CharField(
        max_length=16, choices=WebhookEventStatus.choices, default=WebhookEventStatus.PENDING
    )
    error = models.TextField(blank=True)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-received_at",)
        indexes = [
            models.Index(
                fields=("received_at",),
                condition=models.Q(status="pending"),
                name="webhookevent_pending_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"webhook event {self.pk} ({self.status})"
