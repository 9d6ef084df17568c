"""Contact lists and contacts in the admin."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from campaigns.models import (
    Contact,
    ContactList,
    ListMembership,
)
from whatsblast.admin.pagination import LargeTableAdmin
from whatsblast.admin.uploads import contact_list_upload_view


@admin.register(ContactList)
class ContactListAdmin(admin.ModelAdmin[ContactList]):
    list_display = ("name", "created_at")
    search_fields = ("name",)
    ordering = ("name",)
    readonly_fields = ("member_count", "created_at")
    change_form_template = "admin/campaigns/contactlist/change_form.html"

    @admin.display(description="contacts")
    def member_count(self, obj: ContactList) -> int:
        return ListMembership.objects.filter(contact_list=obj).count() if obj.pk else 0

    def get_urls(self) -> list[URLPattern]:
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
