"""Admin for messages (read-only), dead letters and API keys.

Messages are written by the engine and the webhook applier only; the admin shows them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.formats import date_format

from campaigns.audience.phone_search import phone_search_candidates
from campaigns.models import Contact
from delivery.campaigns.canary import held_for_canary
from delivery.campaigns.progress import OUTCOME_LABELS, OUTCOMES
from delivery.models import Message
from webhooks.selectors import (
    message_opted_out_expression,
    message_replies,
    message_replies_expression,
)
from whatsblast.admin.customer_links import customer_link
from whatsblast.admin.dead_letters import FailedRequeueActions
from whatsblast.admin.pagination import LargeTableAdmin
from whatsblast.admin.tables import json_table, replies_table


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


def messages_to_phones(phones: list[str]) -> Q:
    """Messages to any of these E.164 phones, through indexes: campaign sends by their
    contact (the contacts' unique phone index, then the messages' contact_id index), and
    API sends, which carry no contact, by recipient among the API's rows only (the partial
    index message_api_key_idx); "to" alone has no index of its own."""
    contact_ids = list(Contact.objects.filter(phone__in=phones).values_list("id", flat=True))
    return Q(contact_id__in=contact_ids) | Q(api_key__isnull=False, to__in=phones)


def next_attempt_text(at: datetime | None, *, ab_test: bool = False) -> str:
    """When the row is next tried, in words for a row held back (its date is a sentinel no
    claim reaches, never a real time): by a canary, or, in a campaign with an A/B test
    (``ab_test``), until the winner is decided."""
    if at is None:
        return "-"
    if held_for_canary(at):
        return "held until the A/B test's winner" if ab_test else "held until the canary passes"
    return date_format(timezone.localtime(at), "Y-m-d H:i:s T")


@admin.register(Message)
class MessageAdmin(FailedRequeueActions, LargeTableAdmin):
    list_display = (
        "id",
        "recipient",
        "campaign",
        "template_name",
        "kind",
        "status",
        "attempt",
        "next_attempt",
        "sent_at",
        "last_error_code",
    )
    list_filter = (OutcomeFilter, "status", "kind", "campaign")
    # Exact matches only, each served by an index: a phone in any format through its
    # contact (get_search_results), a wamid through its unique index, a user id by "to".
    search_fields = ("=to", "=wamid")
    search_help_text = (
        "A phone number as people say it ((11) 98765-4321, +55 11 98765-4321), "
        "a WhatsApp user id or a wamid."
    )
    list_select_related = ("campaign", "template")
    ordering = ("-id",)
    exclude = ("params", "error_history", "next_attempt_at")
    readonly_fields = ("customer_page", "next_attempt", "parameters", "attempts", "replies")

    @admin.display(description="to", ordering="to")
    def recipient(self, obj: Message) -> str:
        return customer_link(obj.to)

    @admin.display(description="template")
    def template_name(self, obj: Message) -> str:
        if obj.template is not None:
            return obj.template.name
        return "free text" if obj.text else "-"

    @admin.display(description="customer")
    def customer_page(self, obj: Message) -> str:
        return customer_link(obj.to, "Everything about this customer")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Message], search_term: str
    ) -> tuple[QuerySet[Message], bool]:
        phones = phone_search_candidates(search_term)
        if not phones:
            return super().get_search_results(request, queryset, search_term)
        return queryset.filter(messages_to_phones(phones)), False

    @admin.display(description="next attempt", ordering="next_attempt_at")
    def next_attempt(self, obj: Message) -> str:
        ab_test = obj.campaign is not None and bool(obj.campaign.ab_test_percent)
        return next_attempt_text(obj.next_attempt_at, ab_test=ab_test)

    @admin.display(description="replies")
    def replies(self, obj: Message) -> str:
        return replies_table(message_replies(campaign_id=obj.campaign_id, to=obj.to))

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
