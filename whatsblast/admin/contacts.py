"""Contact lists and contacts in the admin.

The contacts list filters by a saved segment (``whatsblast.admin.segments``) and exports
what it shows as CSV (``export.csv``, the list's own filters and search, streamed). A
contact's page shows its lists and its latest messages, read through the customer page's
selectors (``webhooks.customers``).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from campaigns.audience.phone_search import phone_search_candidates
from campaigns.models import (
    Contact,
    ContactList,
    ListMembership,
)
from delivery.segments.admin_support import contacts_csv
from webhooks.customers import customer_find, customer_messages
from whatsblast.admin.customer_links import customer_link, customer_url
from whatsblast.admin.pagination import LargeTableAdmin
from whatsblast.admin.segments import SegmentListFilter  # registers the segment admin too
from whatsblast.admin.uploads import contact_list_upload_view

# The newest messages a contact's page shows (the customer page has the same cap).
HISTORY_SHOWN = 50


@admin.register(ContactList)
class ContactListAdmin(admin.ModelAdmin[ContactList]):
    list_display = ("name", "suppression", "created_at")
    list_filter = ("suppression",)
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
    change_form_template = "admin/campaigns/contact/change_form.html"
    actions = ("export_selected",)
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

    def get_list_filter(self, request: HttpRequest) -> list[Any]:
        filters = list(super().get_list_filter(request))
        # The segments' names are theirs to see who may view segments.
        if request.user.has_perm("campaigns.view_segment"):
            filters.append(SegmentListFilter)
        return filters

    # --- the CSV export ---------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "export.csv",
                self.admin_site.admin_view(self.export_view),
                name="campaigns_contact_export",
            ),
            *super().get_urls(),
        ]

    def export_view(self, request: HttpRequest) -> HttpResponseBase:
        """The list as it is filtered and searched (the same query string), as CSV."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            return HttpResponseRedirect(reverse("admin:campaigns_contact_changelist"))
        return contacts_csv_response(changelist.queryset)

    @admin.action(description="Export the selected contacts as CSV", permissions=["view"])
    def export_selected(
        self, request: HttpRequest, queryset: QuerySet[Contact]
    ) -> HttpResponseBase:
        return contacts_csv_response(queryset)

    # --- a contact's page -----------------------------------------------------------------

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Contact | None = None,
    ) -> HttpResponse:
        if obj is not None and obj.pk is not None:
            context.update(contact_page_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)


def contacts_csv_response(queryset: QuerySet[Contact]) -> StreamingHttpResponse:
    """``queryset`` as a CSV download, written as it is read (100,000 rows never sit in
    memory)."""
    response = StreamingHttpResponse(contacts_csv(queryset), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    response["Content-Disposition"] = f'attachment; filename="contacts-{stamp}.csv"'
    return response


def contact_page_context(request: HttpRequest, contact: Contact) -> dict[str, Any]:
    """The contact's lists and latest messages (as the customer page reads them)."""
    user = request.user
    may_see_lists = user.has_perm("campaigns.view_contactlist")
    lists = [
        {
            "name": name,
            "url": reverse("admin:campaigns_contactlist_change", args=[pk])
            if may_see_lists
            else "",
        }
        for pk, name in contact.lists.order_by("name").values_list("pk", "name")
    ]
    context: dict[str, Any] = {
        "contact_lists": lists,
        "customer_url": customer_url(contact.recipient),
        "may_see_messages": user.has_perm("delivery.view_message"),
        "may_see_campaigns": user.has_perm("campaigns.view_campaign"),
        "history": [],
        "history_count": 0,
        "history_shown": HISTORY_SHOWN,
    }
    if not context["may_see_messages"]:
        return context
    customer = customer_find(contact.recipient)
    if customer is None:
        return context
    sent = customer_messages(customer).select_related("campaign", "template")
    history = list(sent[:HISTORY_SHOWN])
    count = sent.count() if len(history) == HISTORY_SHOWN else len(history)
    context.update({"history": history, "history_count": count, "history_total": f"{count:,}"})
    return context
