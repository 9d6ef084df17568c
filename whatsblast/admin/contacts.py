"""Contact lists and contacts in the admin."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from campaigns.audience.phone_search import phone_search_candidates
from campaigns.models import (
    Contact,
    ContactList,
    ListMembership,
)
from whatsblast.admin.customer_links import customer_link
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


class AttributesField(forms.CharField):
    """A contact's attributes as "name = value" lines, one a line, not a JSON box."""

    widget = forms.Textarea(attrs={"rows": 6, "cols": 60, "class": "wb-attributes"})

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, dict):
            return "\n".join(f"{k} = {'' if v is None else v}" for k, v in value.items())
        return str(value or "")

    def to_python(self, value: Any) -> dict[str, str]:  # type: ignore[override]
        attributes: dict[str, str] = {}
        for number, line in enumerate(str(value or "").splitlines(), start=1):
            if not line.strip():
                continue
            name, sep, text = line.partition("=")
            if not sep or not name.strip():
                raise ValidationError(f"Line {number}: write it as name = value.")
            attributes[name.strip()] = text.strip()
        return attributes


class ContactForm(forms.ModelForm[Contact]):
    attributes = AttributesField(
        required=False,
        label="Fields",
        help_text="One a line, as name = value (coupon = SPRING10). Campaigns can put "
        "any of these into a message.",
    )

    class Meta:
        model = Contact
        fields = ("phone", "user_id", "name", "attributes", "opted_in_at", "opted_out_at")


@admin.register(Contact)
class ContactAdmin(LargeTableAdmin):
    form = ContactForm
    # A contact known only by its WhatsApp user id shows "-" as its phone.
    list_display = (
        "phone",
        "user_id",
        "name",
        "opted_in_at",
        "opted_out_at",
        "created_at",
        "customer_page",
    )
    list_filter = (("opted_out_at", admin.EmptyFieldListFilter), "lists")
    # A phone in any format is matched exactly on the phone's unique index
    # (get_search_results); otherwise "=user_id" is served by its unique index, name
    # search scans, as it must, and the username (no index) is matched on the way.
    search_fields = ("=phone", "=user_id", "=username", "name")
    search_help_text = (
        "A phone number as people say it ((11) 98765-4321, +55 11 98765-4321), exact "
        "WhatsApp user id (US.1349…), exact WhatsApp username (with or without @) or part "
        "of a name."
    )
    ordering = ("phone", "user_id")
    # Learnt from Meta's callbacks with the user id, never typed in.
    readonly_fields = (
        "customer_page",
        "opted_out_reason",
        "parent_user_id",
        "username",
        "created_at",
        "updated_at",
    )

    @admin.display(description="customer")
    def customer_page(self, obj: Contact) -> str:
        if obj.pk is None:
            return "-"
        return customer_link(obj.recipient, "Customer page")

    def get_search_results(
        self, request: HttpRequest, queryset: Any, search_term: str
    ) -> tuple[Any, bool]:
        phones = phone_search_candidates(search_term)
        if phones:
            return queryset.filter(phone__in=phones), False
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        # Usernames are stored without their "@" (Meta writes them both ways): "@kfisher"
        # finds the contact "kfisher" does.
        bare = search_term.strip().lstrip("@")
        if bare and bare != search_term.strip():
            results |= queryset.filter(username__iexact=bare)
        return results, may_have_duplicates
