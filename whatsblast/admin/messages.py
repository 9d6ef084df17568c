"""Admin for messages (read-only), dead letters and API keys.

Messages are written by the engine and the webhook applier only; the admin shows them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from delivery.campaigns.progress import OUTCOME_LABELS, OUTCOMES
from delivery.models import Message
from webhooks.selectors import message_opted_out_expression, message_replies_expression
from whatsblast.admin.pagination import LargeTableAdmin
from whatsblast.admin.tables import json_table


class OutcomeFilter(admin.SimpleListFilter):
    """The words of the campaign pages (``OUTCOMES``): "delivered" here counts what the
    campaign's "Delivered" counts, read messages included."""

    title = "outcome"
    parameter_name = "outcome"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        choices = [(k, OUTCOME_LABELS[k][0]) for k in OUTCOMES if k != "audience"]
        return [*choices, ("replied", "Replied"), ("opted_out", "Opted out in a reply")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Message]) -> Any:
        value = self.value()
        if value is None:
            return queryset
        if value in OUTCOMES:
            return queryset.filter(status__in=OUTCOMES[value])
        if value == "replied":
            return queryset.alias(replies=message_replies_expression()).filter(replies__gt=0)
        if value == "opted_out":
            return queryset.filter(message_opted_out_expression())
        return queryset.none()


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
    list_filter = (OutcomeFilter, "status", "kind", "campaign")
    # Exact matches only: each is served by an index (unique wamid; the recipient through
    # the per-campaign unique constraint when a campaign is chosen).
    search_fields = ("=to", "=wamid")
    search_help_text = "Exact recipient (+5511999990000) or wamid."
    list_select_related = ("campaign",)
    ordering = ("-id",)
    exclude = ("params", "error_history")
    readonly_fields = ("parameters", "attempts")

    @admin.display(description="parameters sent")
    def parameters(self, obj: Message) -> str:
        return json_table(obj.params)

    @admin.display(description="errors, attempt by attempt")
    def attempts(self, obj: Message) -> str:
        return json_table(obj.error_history, empty="None.")

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
