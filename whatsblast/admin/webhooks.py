"""Webhook tables in the admin: read-only records for support, one action to re-apply."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from campaigns.audience.phone_search import phone_search_candidates
from webhooks.models import (
    AsyncError,
    InboundMessage,
    MarketingClick,
    UnmatchedStatus,
    WebhookEvent,
)
from webhooks.services import events_requeue
from whatsblast.admin.customer_links import customer_link
from whatsblast.admin.tables import json_table


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    """Machine-written rows: viewable, never edited or deleted by hand (they are the record
    of what Meta sent; there is no API to fetch a webhook again)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(WebhookEvent)
class WebhookEventAdmin(ReadOnlyAdmin):
    list_display = ("id", "received_at", "status", "processed_at", "error")
    list_filter = ("status",)
    search_fields = ("body_sha256",)
    ordering = ("-received_at",)
    readonly_fields = ("body_table", "body_text")
    exclude = ("body",)
    actions = ("requeue",)

    @admin.display(description="what Meta sent")
    def body_table(self, obj: WebhookEvent) -> str:
        try:
            return json_table(json.loads(bytes(obj.body)))
        except ValueError:
            return "Not JSON: see the raw body below."

    @admin.display(description="raw body (as received, for signatures)")
    def body_text(self, obj: WebhookEvent) -> str:
        return bytes(obj.body).decode("utf-8", "replace")

    def has_reapply_permission(self, request: HttpRequest) -> bool:
        # Applying again repeats template and account effects (pausing campaigns): an
        # operator's decision, not support's, who can only read these records.
        return request.user.has_perm("webhooks.change_webhookevent")

    @admin.action(description="Apply again", permissions=("reapply",))
    def requeue(self, request: HttpRequest, queryset: QuerySet[WebhookEvent]) -> None:
        count = events_requeue(event_ids=list(queryset.values_list("id", flat=True)))
        self.message_user(request, f"{count} events queued to apply again.", messages.SUCCESS)


@admin.register(UnmatchedStatus)
class UnmatchedStatusAdmin(ReadOnlyAdmin):
    list_display = ("wamid", "status", "callback_data", "first_seen_at", "attempts", "reported_at")
    list_filter = ("status", ("reported_at", admin.EmptyFieldListFilter))
    search_fields = ("wamid", "callback_data")
    ordering = ("-first_seen_at",)
    exclude = ("payload",)
    readonly_fields = ("payload_table",)

    @admin.display(description="status callback")
    def payload_table(self, obj: UnmatchedStatus) -> str:
        return json_table(obj.payload)


@admin.register(InboundMessage)
class InboundMessageAdmin(ReadOnlyAdmin):
    list_display = ("sent_at", "sender", "type", "text", "is_opt_out", "campaign")
    list_filter = ("is_opt_out", "type")
    # Exact matches, each on an index: the sender's phone in any format (inbound_from_idx,
    # get_search_results), the wamid (unique).
    search_fields = ("=wamid",)
    search_help_text = (
        "A phone number as people say it ((11) 98765-4321, +55 11 98765-4321) or a wamid."
    )
    list_select_related = ("campaign",)
    ordering = ("-sent_at",)

    @admin.display(description="from", ordering="from_phone")
    def sender(self, obj: InboundMessage) -> str:
        return customer_link(obj.from_phone or obj.from_user_id)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[InboundMessage], search_term: str
    ) -> tuple[QuerySet[InboundMessage], bool]:
        phones = phone_search_candidates(search_term)
        if phones:
            return queryset.filter(from_phone__in=phones), False
        return super().get_search_results(request, queryset, search_term)


@admin.register(MarketingClick)
class MarketingClickAdmin(ReadOnlyAdmin):
    """Clicks Meta reported on Marketing Messages API sends, as Meta gave them."""

    list_display = (
        "received_at",
        "action_type",
        "click_component",
        "product_id",
        "tracking_token",
        "phone_number_id",
    )
    list_filter = ("action_type", "click_component")
    search_fields = ("tracking_token", "click_id", "product_id")
    ordering = ("-received_at",)


@admin.register(AsyncError)
class AsyncErrorAdmin(ReadOnlyAdmin):
    list_display = ("received_at", "code", "title", "phone_number_id")
    list_filter = ("code",)
    ordering = ("-received_at",)
