"""Admin for accounts, numbers, templates, contacts and campaigns.

Machine-owned fields (quality rating, adaptive rate, params parsed from a template body,
campaign status and timestamps) are read-only here: services and webhooks own them. Tables
that grow to millions of rows (contacts, messages) count at most ``COUNT_CAP`` rows per
list page and never list what a delete would cascade to.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.functional import cached_property

# Registers CampaignAdmin: the campaign pages (create with preview, pre-flight, launch, live
# progress) live in their own module.
from campaigns import campaign_admin  # noqa: F401
from campaigns.models import (
    BusinessAccount,
    Contact,
    ContactList,
    ListMembership,
    PhoneNumber,
    Template,
)
from campaigns.services import template_params_parse

# Above this many matching rows a list page says "COUNT_CAP" instead of counting them all:
# an exact count(*) over ten million rows takes seconds on every page load.
COUNT_CAP = 10_000


class CappedCountPaginator(Paginator):  # type: ignore[type-arg]
    """Counts at most ``COUNT_CAP`` rows; pages beyond it are reached by filtering."""

    @cached_property
    def count(self) -> int:
        return int(self.object_list[:COUNT_CAP].count())  # type: ignore[attr-defined]


class LargeTableAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """List pages whose cost does not grow with the table."""

    paginator = CappedCountPaginator
    show_full_result_count = False
    list_per_page = 50


@admin.register(BusinessAccount)
class BusinessAccountAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("waba_id", "name", "business_id", "messaging_limit_tier", "updated_at")
    list_filter = ("messaging_limit_tier",)
    search_fields = ("waba_id", "name", "business_id")
    ordering = ("name", "waba_id")
    readonly_fields = ("created_at", "updated_at")
    actions = ("sync_templates",)

    @admin.action(description="Sync templates from Meta")
    def sync_templates(self, request: HttpRequest, queryset: QuerySet[BusinessAccount]) -> None:
        from campaigns.templates_sync import templates_sync

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


class WriteOnlyField(forms.CharField):
    """A secret typed in, never rendered back; blank means "unchanged"."""

    widget = forms.PasswordInput(render_value=False)

    def has_changed(self, initial: Any, data: Any) -> bool:
        return bool(data)


class PhoneNumberAdminForm(forms.ModelForm):  # type: ignore[type-arg]
    access_token = WriteOnlyField(
        required=False,
        help_text="Stored, never shown again. Leave blank to keep the current token.",
    )
    api_base_url = forms.URLField(
        label="API base URL",
        required=False,
        assume_scheme="https",
        help_text=PhoneNumber._meta.get_field("api_base_url").help_text,
    )

    class Meta:
        model = PhoneNumber
        fields = (
            "phone_number_id",
            "display_phone_number",
            "account",
            "access_token",
            "api_base_url",
            "rate_per_second",
            "transactional_reserve",
            "paused_until",
            "paused_reason",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Not even as the "initial" value: nothing of the token reaches the page.
        self.initial.pop("access_token", None)

    def clean_access_token(self) -> str:
        token = str(self.cleaned_data.get("access_token") or "").strip()
        if token:
            return token
        if self.instance.pk:
            return str(self.instance.access_token)
        raise ValidationError("A new number needs its access token.")


@admin.register(PhoneNumber)
class PhoneNumberAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = PhoneNumberAdminForm
    list_display = (
        "display_phone_number",
        "phone_number_id",
        "account",
        "rate_per_second",
        "transactional_reserve",
        "effective_rate",
        "quality_rating",
        "paused_until",
    )
    list_filter = ("quality_rating", "account")
    search_fields = ("display_phone_number", "phone_number_id")
    list_select_related = ("account",)
    ordering = ("display_phone_number",)
    readonly_fields = ("effective_rate", "quality_rating", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("phone_number_id", "display_phone_number", "account")}),
        ("Cloud API", {"fields": ("access_token", "api_base_url")}),
        ("Throughput", {"fields": ("rate_per_second", "transactional_reserve", "effective_rate")}),
        ("Health", {"fields": ("quality_rating", "paused_until", "paused_reason")}),
        (None, {"fields": ("created_at", "updated_at")}),
    )


class TemplateAdminForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Template
        fields = ("account", "name", "language", "category", "status", "body_text", "components")

    def clean_body_text(self) -> str:
        body = str(self.cleaned_data.get("body_text") or "")
        self.body_params = template_params_parse(body)
        return body


@admin.register(Template)
class TemplateAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = TemplateAdminForm
    list_display = (
        "name",
        "language",
        "category",
        "status",
        "account",
        "body_param_count",
        "updated_at",
    )
    list_filter = ("status", "category", "language")
    search_fields = ("name", "meta_template_id")
    list_select_related = ("account",)
    ordering = ("name", "language")
    readonly_fields = (
        "meta_template_id",
        "status_reason",
        "body_param_count",
        "body_param_names",
        "created_at",
        "updated_at",
    )

    def save_model(self, request: HttpRequest, obj: Template, form: Any, change: bool) -> None:
        obj.body_param_count, obj.body_param_names = form.body_params
        super().save_model(request, obj, form, change)


@admin.register(ContactList)
class ContactListAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "created_at")
    search_fields = ("name",)
    ordering = ("name",)
    readonly_fields = ("member_count", "created_at")

    @admin.display(description="contacts")
    def member_count(self, obj: ContactList) -> int:
        return ListMembership.objects.filter(contact_list=obj).count() if obj.pk else 0

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        # The default page lists every membership row it would delete: millions of lines.
        lists = list(objs)
        members = ListMembership.objects.filter(contact_list__in=lists).count()
        return [str(cl) for cl in lists], {"lists": len(lists), "memberships": members}, set(), []


@admin.register(Contact)
class ContactAdmin(LargeTableAdmin):
    list_display = ("phone", "name", "opted_in_at", "opted_out_at", "created_at")
    list_filter = (("opted_out_at", admin.EmptyFieldListFilter), "lists")
    # "=phone" is an exact match the unique index serves; name search scans, as it must.
    search_fields = ("=phone", "name")
    search_help_text = "Exact E.164 phone (+5511999990000) or part of a name."
    ordering = ("phone",)
    readonly_fields = ("created_at", "updated_at")
