"""Admin for messages (read-only) and dead letters.

Messages are written by the engine and the webhook applier only; the admin shows them.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from campaigns.admin import LargeTableAdmin
from delivery.models import DeadLetter, Message


@admin.register(Message)
class MessageAdmin(LargeTableAdmin):
    list_display = (
        "id",
        "to",
        "campaign",
        "kind",
        "status",
        "attempt",
        "next_attempt_at",
        "sent_at",
        "last_error_code",
    )
    list_filter = ("status", "kind", "campaign")
    # Exact matches only: each is served by an index (unique wamid; the recipient through
    # the per-campaign unique constraint when a campaign is chosen).
    search_fields = ("=to", "=wamid")
    search_help_text = "Exact recipient (+5511999990000) or wamid."
    list_select_related = ("campaign",)
    ordering = ("-id",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Message | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Message | None = None) -> bool:
        return False


@admin.register(DeadLetter)
class DeadLetterAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = (
        "id",
        "message",
        "campaign",
        "phone_number",
        "error_code",
        "error_title",
        "status",
        "created_at",
    )
    list_filter = ("status", "error_code")
    search_fields = ("=message__to", "error_title")
    list_select_related = ("message", "campaign", "phone_number")
    ordering = ("-created_at",)
    show_full_result_count = False
    raw_id_fields = ("message",)
    # Support writes a note; everything else records what happened.
    readonly_fields = (
        "message",
        "campaign",
        "phone_number",
        "error_code",
        "error_title",
        "payload",
        "attempts",
        "status",
        "created_at",
        "resolved_at",
        "resolved_by",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


# API keys of the transactional API: their admin lives with the API (delivery/api/admin.py).
from delivery.api.admin import ApiKeyAdmin  # noqa: E402, F401
