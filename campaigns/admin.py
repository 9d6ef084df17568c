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
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.utils.functional import cached_property

# Registers CampaignAdmin: the campaign pages (create with preview, pre-flight, launch, live
# progress) live in their own module.
from campaigns import campaign_admin  # noqa: F401
from campaigns.models import (
    BusinessAccount,
    Contact,
    ContactList,
    ListMembership,
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

    @admin.action(description="Sync templates from Meta", permissions=("change",))
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
    change_form_template = "admin/campaigns/contactlist/change_form.html"

    @admin.display(description="contacts")
    def member_count(self, obj: ContactList) -> int:
        return ListMembership.objects.filter(contact_list=obj).count() if obj.pk else 0

    def get_urls(self) -> list[URLPattern]:
        from campaigns.upload_admin import contact_list_upload_view

        def upload(request: HttpRequest, object_id: int) -> HttpResponse:
            return contact_list_upload_view(request, self, object_id)

        upload.csrf_exempt = True  # type: ignore[attr-defined]  # see contact_list_upload_view
        return [
            path(
                "<int:object_id>/upload/",
                self.admin_site.admin_view(upload),
                name="campaigns_contactlist_upload",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra = dict(extra_context or {})
        extra["can_upload"] = request.user.has_perm("campaigns.add_contactupload")
        return super().change_view(request, object_id, form_url, extra)

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


# Phone numbers (pause, resume, test send) and contact uploads have modules of their own.
from campaigns import number_admin, upload_admin  # noqa: E402, F401
