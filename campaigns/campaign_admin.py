"""The campaign admin, in its own module (registered by importing it from campaigns.admin)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from campaigns.models import Campaign, CampaignStatus
from campaigns.selectors import campaign_progress
from campaigns.services import param_mapping_validate


class CampaignAdminForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Campaign
        fields = (
            "name",
            "phone_number",
            "template",
            "lists",
            "param_mapping",
            "scheduled_at",
            "max_attempts",
            "ambiguous_policy",
        )

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        template, mapping = cleaned.get("template"), cleaned.get("param_mapping")
        if template is not None and isinstance(mapping, dict):
            try:
                param_mapping_validate(template=template, param_mapping=mapping)
            except ValidationError as exc:
                self.add_error("param_mapping", exc)
        number = cleaned.get("phone_number")
        if (
            template is not None
            and number is not None
            and template.account_id != (number.account_id)
        ):
            self.add_error("template", "The template belongs to another WABA than the number.")
        return cleaned


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = CampaignAdminForm
    list_display = (
        "name",
        "status",
        "phone_number",
        "template",
        "created_at",
        "started_at",
        "completed_at",
    )
    list_filter = ("status", "phone_number")
    search_fields = ("name",)
    list_select_related = ("phone_number", "template")
    ordering = ("-created_at",)
    filter_horizontal = ("lists",)
    readonly_fields = (
        "status",
        "status_reason",
        "started_at",
        "completed_at",
        "created_at",
        "updated_at",
        "progress",
    )

    @admin.display(description="progress")
    def progress(self, obj: Campaign) -> str:
        if not obj.pk:
            return "-"
        p = campaign_progress(campaign=obj)
        counts = format_html_join(", ", "{} {}", ((s, n) for s, n in p.counts.items() if n))
        eta = "unknown" if p.eta_seconds is None else f"{p.eta_seconds:.0f}s"
        return format_html(
            "{} messages, {} remaining ({}); {} msg/s over the last minute, ETA {}",
            p.total,
            p.remaining,
            counts or "none yet",
            p.rate_per_second,
            eta,
        )

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        # A launched campaign owns up to millions of messages: the default page would load
        # them all to list them. Campaigns with messages are cancelled, not deleted.
        ids = [c.pk for c in objs]
        launched: QuerySet[Campaign] = Campaign.objects.filter(
            pk__in=ids, messages__isnull=False
        ).distinct()
        if launched.exists():
            protected = [f"{c} has messages: cancel it instead" for c in launched]
            return [], {}, set(), protected
        return super().get_deleted_objects(objs, request)

    def has_change_permission(self, request: HttpRequest, obj: Campaign | None = None) -> bool:
        # Once launched, its messages were rendered from these settings: editing them
        # would make the record lie. Lifecycle changes go through the services.
        if obj is not None and obj.status not in (CampaignStatus.DRAFT, CampaignStatus.SCHEDULED):
            return False
        return super().has_change_permission(request, obj)
