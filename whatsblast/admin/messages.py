"""Admin for messages (read-only), dead letters and API keys.

Messages are written by the engine and the webhook applier only; the admin shows them.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from delivery.models import Message
from whatsblast.admin.pagination import LargeTableAdmin


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


# Dead letters for support: filters, the detail page, requeue and discard.
# API keys of the transactional API: their admin lives with the API (delivery/api/admin.py).
from whatsblast.admin import dead_letters as dead_letter_admin  # noqa: E402, F401
from whatsblast.admin.api_keys import ApiKeyAdmin  # noqa: E402, F401
