"""Accounts and templates in the admin.

Machine-owned fields (params parsed from a template body, what the sync recorded) are
read-only here: services and webhooks own them.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from campaigns.catalogue.params import template_params_parse
from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.models import (
    BusinessAccount,
    RateCard,
    Template,
)
from delivery.cloud.template_sync import templates_sync


@admin.register(BusinessAccount)
class BusinessAccountAdmin(admin.ModelAdmin[BusinessAccount]):
    list_display = (
        "waba_id",
        "name",
        "business_id",
        "messaging_limit_tier",
        "account_review_status",
        "graph_read_at",
        "updated_at",
    )
    list_filter = ("messaging_limit_tier",)
    search_fields = ("waba_id", "name", "business_id")
    ordering = ("name", "waba_id")
    readonly_fields = (
        "account_review_status",
        "graph_read_at",
        "graph_error",
        "created_at",
        "updated_at",
    )
    actions = ("sync_templates",)

    @admin.action(description="Sync templates from Meta", permissions=("change",))
    def sync_templates(self, request: HttpRequest, queryset: QuerySet[BusinessAccount]) -> None:
        for account in queryset:
            report = templates_sync(account=account)
            if not report.ok:
                self.message_user(
                    request, f"WABA {account.waba_id}: {report.error}", messages.ERROR
                )
                continue
            self.message_user(
                request,
                f"WABA {account.waba_id}: {report.listed} templates, {report.created} new, "
                f"{report.changed} changed, {report.removed} removed upstream"
                + (f", {len(report.unusable)} not usable by campaigns" if report.unusable else ""),
                messages.SUCCESS,
            )
            for name, reasons in sorted(report.unusable.items()):
                self.message_user(
                    request,
                    f"WABA {account.waba_id}: {name} is not usable by campaigns: "
                    + "; ".join(reasons),
                    messages.WARNING,
                )


class TemplateAdminForm(forms.ModelForm[Template]):
    class Meta:
        model = Template
        fields = ("account", "name", "language", "category", "status", "body_text", "components")

    def clean_body_text(self) -> str:
        body = str(self.cleaned_data.get("body_text") or "")
        self.body_params = template_params_parse(body)
        return body


@admin.register(Template)
class TemplateAdmin(admin.ModelAdmin[Template]):
    form = TemplateAdminForm
    list_display = (
        "name",
        "language",
        "category",
        "status",
        "account",
        "body_param_count",
        "send_problems",
        "updated_at",
    )
    list_filter = ("status", "category", "language")
    search_fields = ("name", "meta_template_id")
    list_select_related = ("account",)
    ordering = ("name", "language")
    readonly_fields = (
        "meta_template_id",
        "status_reason",
        "send_problems",
        "body_param_count",
        "body_param_names",
        "created_at",
        "updated_at",
    )

    @admin.display(description="Unusable by campaigns")
    def send_problems(self, obj: Template) -> str:
        """Why this version cannot send the template (a carousel, a coupon code…); "-"."""
        reasons = template_unusable_reasons(obj)
        return "; ".join(reasons) if reasons else "-"

    def save_model(self, request: HttpRequest, obj: Template, form: Any, change: bool) -> None:
        obj.body_param_count, obj.body_param_names = form.body_params
        super().save_model(request, obj, form, change)


@admin.register(RateCard)
class RateCardAdmin(admin.ModelAdmin[RateCard]):
    """Meta's per-message prices as the operator keeps them: costs and pre-flight estimates."""

    list_display = ("country_prefix", "category", "price", "currency", "updated_at")
    list_editable = ("price", "currency")
    list_filter = ("category", "currency")
    search_fields = ("country_prefix",)
    ordering = ("country_prefix", "category")
