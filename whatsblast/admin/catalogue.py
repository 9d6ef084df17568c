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
from delivery.cloud.template_sync import (
    TemplateTtlError,
    template_ttl_set,
    templates_sync,
    ttl_range_check,
)


@admin.register(BusinessAccount)
class BusinessAccountAdmin(admin.ModelAdmin[BusinessAccount]):
    list_display = (
        "waba_id",
        "name",
        "business_id",
        "messaging_limit_tier",
        "account_review_status",
        "marketing_messages_api",
        "mm_onboarding_status",
        "graph_read_at",
        "updated_at",
    )
    list_filter = ("messaging_limit_tier", "marketing_messages_api")
    search_fields = ("waba_id", "name", "business_id")
    ordering = ("name", "waba_id")
    readonly_fields = (
        "account_review_status",
        "mm_onboarding_status",
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
        fields = (
            "account",
            "name",
            "language",
            "category",
            "status",
            "body_text",
            "components",
            "message_send_ttl_seconds",
        )
        help_texts = {
            "message_send_ttl_seconds": "How long Meta tries to deliver a send, set at Meta on "
            "save. Marketing: 43,200 to 2,592,000 (12 h to 30 days), honoured only through "
            "the Marketing Messages API; utility 30 to 43,200; authentication 30 to 900.",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        seconds = data.get("message_send_ttl_seconds")
        if seconds is not None:
            try:
                ttl_range_check(str(data.get("category") or ""), int(seconds))
            except TemplateTtlError as exc:
                self.add_error("message_send_ttl_seconds", str(exc))
        return data

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
        "message_send_ttl_seconds",
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
        seconds = obj.message_send_ttl_seconds
        ttl_changed = change and "message_send_ttl_seconds" in form.changed_data
        if ttl_changed:
            obj.message_send_ttl_seconds = form.initial.get("message_send_ttl_seconds")
        super().save_model(request, obj, form, change)
        if ttl_changed and seconds is not None:
            try:
                template_ttl_set(template=obj, seconds=seconds)
            except TemplateTtlError as exc:
                self.message_user(request, f"Time to live not changed: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"Time to live set at Meta: {seconds:,} s.")


@admin.register(RateCard)
class RateCardAdmin(admin.ModelAdmin[RateCard]):
    """Meta's per-message prices as the operator keeps them: costs and pre-flight estimates."""

    list_display = ("country_prefix", "category", "price", "currency", "updated_at")
    list_editable = ("price", "currency")
    list_filter = ("category", "currency")
    search_fields = ("country_prefix",)
    ordering = ("country_prefix", "category")
