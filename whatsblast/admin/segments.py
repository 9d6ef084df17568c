"""Segments in the admin: the builder, its live count, and the contacts list's segment filter.

A segment's change page edits its ``rules`` (the JSON of ``delivery.segments.rules``) in a
builder (``static/whatsblast/segment_builder.js``): rule rows, nested all/any groups,
"not", list membership, a campaign's outcome and recent marketing, with the raw JSON one
click away. After every change the page posts the rules to ``count/`` (JSON), which answers
how many contacts they match now and the first few, or the rule's error naming its path.
Saving checks the rules as ``segment_save`` does (every list and campaign they name must
exist); the error is the form's, never a 500.

Views parse, check permissions and call the services (``delivery.segments``).
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from campaigns.models import Contact, Segment
from delivery.segments.admin_support import (
    SAMPLE_SIZE,
    SegmentTooSlow,
    attribute_keys,
    builder_choices,
    contacts_in_segment,
    segment_preview,
)
from delivery.segments.rules import (
    CONTACT_FIELDS,
    DATE_FIELDS,
    FIELD_OPS,
    MAX_DAYS,
    OPS,
    RuleError,
)
from delivery.segments.services import rules_json, segment_compile, segments_in_use
from whatsblast.admin.customer_links import customer_url

# How the builder names each contact field and each outcome of a campaign's message.
FIELD_LABELS = {
    "phone": "Phone",
    "name": "Name",
    "country": "Country (by phone)",
    "created": "Date added",
    "opted_in": "Date opted in",
}
OUTCOME_LABELS = {
    "not_sent": "was not sent the message",
    "sent": "was sent the message",
    "failed": "could not be sent it (failed)",
    "delivered": "got it (delivered)",
    "delivered_not_read": "got it but did not read it",
    "read": "read it",
    "replied": "replied to it",
    "opted_out": "opted out after it",
}
# Segments offered by the contacts list's filter (by name).
FILTER_SEGMENTS = 200


def builder_options() -> dict[str, Any]:
    """What the builder offers: fields with their operators, attribute names, lists,
    campaigns and outcomes."""
    return {
        "contact_fields": [
            {"name": name, "label": FIELD_LABELS[name], "ops": list(FIELD_OPS[name])}
            for name in CONTACT_FIELDS
        ],
        "date_fields": list(DATE_FIELDS),
        "ops": list(OPS),
        "attributes": attribute_keys(),
        "outcomes": [{"value": key, "label": label} for key, label in OUTCOME_LABELS.items()],
        "max_days": MAX_DAYS,
        **builder_choices(),
    }


def rules_text(rules: Any) -> str:
    """Rules as the JSON box shows them: indented, accents as they are."""
    return json.dumps(rules, indent=2, ensure_ascii=False)


class RulesField(forms.Field):
    """The rules as JSON text in a textarea; cleaned to the parsed JSON."""

    widget = forms.Textarea(
        attrs={"rows": 16, "cols": 80, "class": "wb-rules-json", "spellcheck": "false"}
    )

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, str):  # as typed (a form sent back with an error)
            return value
        return "" if value is None else rules_text(value)

    def to_python(self, value: Any) -> Any:
        if value in self.empty_values:
            return None
        try:
            return rules_json(value)
        except RuleError as exc:
            raise ValidationError(str(exc), code="json") from exc


class SegmentForm(forms.ModelForm[Segment]):
    rules = RulesField(
        help_text='The JSON the builder writes, as in {"all": [{"field": "city", "op": "eq", '
        '"value": "Recife"}, {"not": {"list": "staff"}}]}.'
    )

    class Meta:
        model = Segment
        fields = ("name", "description", "rules")
        widgets = {"description": forms.Textarea(attrs={"rows": 2, "cols": 80})}

    def clean_rules(self) -> Any:
        rules = self.cleaned_data["rules"]
        try:
            segment_compile(rules)  # what segment_save checks: the rules and their names
        except RuleError as exc:
            raise ValidationError(str(exc), code="rule") from exc
        return rules


@admin.register(Segment)
class SegmentAdmin(admin.ModelAdmin[Segment]):
    form = SegmentForm
    list_display = ("name", "short_description", "updated_at", "contacts")
    search_fields = ("name", "description")
    search_help_text = "Part of a segment's name or description."
    ordering = ("name",)
    fieldsets = (
        (None, {"fields": ("name", "description")}),
        # Rendered by the change form's template as the builder.
        ("Who is in it", {"fields": ("rules",), "classes": ("wb-rules",)}),
    )
    change_form_template = "admin/campaigns/segment/change_form.html"

    @admin.display(description="description")
    def short_description(self, obj: Segment) -> str:
        return Truncator(obj.description).chars(80)

    @admin.display(description="contacts")
    def contacts(self, obj: Segment) -> str:
        # Counting every segment on the list would run every segment's query: the count
        # is on the segment's own page.
        change = reverse("admin:campaigns_segment_change", args=[obj.pk])
        return format_html(
            '<a href="{}#wb-count" class="wb-count-link">Count on its page</a>', change
        )

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        """A segment a draft or scheduled campaign uses is protected: deleting it would
        silently change whom that campaign sends to."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, perms_needed, [*protected, *segments_in_use(list(objs))]

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "count/",
                self.admin_site.admin_view(self.count_view),
                name="campaigns_segment_count",
            ),
            *super().get_urls(),
        ]

    def count_view(self, request: HttpRequest) -> HttpResponse:
        """``POST rules=<JSON>``: how many contacts the rules match now, and the first few;
        a bad rule (or JSON) is a 400 with the error and the rule's path."""
        if not self.has_view_permission(request):
            return JsonResponse({"error": "You may not view segments."}, status=403)
        if request.method != "POST":
            return JsonResponse({"error": "Send the rules by POST."}, status=405)
        try:
            match = segment_preview(request.POST.get("rules", ""), sample=SAMPLE_SIZE)
        except RuleError as exc:
            return JsonResponse(
                {"error": str(exc), "path": exc.path, "problems": exc.problems}, status=400
            )
        except SegmentTooSlow as exc:
            return JsonResponse({"error": str(exc), "path": ""}, status=400)
        noun = "contact" if match.count == 1 else "contacts"
        return JsonResponse(
            {
                "count": match.count,
                "count_text": f"{match.count:,} {noun}",
                "sample": [_sample_row(row) for row in match.sample],
            }
        )

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Segment | None = None,
    ) -> HttpResponse:
        adminform = context.get("adminform")
        readonly = adminform.readonly_fields if adminform is not None else ()
        context.update(
            {
                # A viewer without the change permission reads the rules, never edits them.
                "rules_editable": "rules" not in readonly,
                "builder_options": builder_options(),
                "count_url": reverse("admin:campaigns_segment_count"),
                "rules_readonly": rules_text(obj.rules) if obj is not None else "",
                "contacts_url": (
                    f"{reverse('admin:campaigns_contact_changelist')}?segment={obj.pk}"
                    if obj is not None and request.user.has_perm("campaigns.view_contact")
                    else ""
                ),
            }
        )
        return super().render_change_form(request, context, add, change, form_url, obj)


def _sample_row(row: dict[str, Any]) -> dict[str, Any]:
    key = row["phone"] or row["user_id"] or ""
    return {
        "id": row["id"],
        "key": key,
        "name": row["name"],
        "customer_url": customer_url(key),
        "contact_url": reverse("admin:campaigns_contact_change", args=[row["id"]]),
    }


class SegmentListFilter(admin.SimpleListFilter):
    """Contacts a saved segment matches now (its rules run as a subquery, values bound)."""

    title = "segment"
    parameter_name = "segment"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        segments = Segment.objects.order_by("name").values_list("pk", "name")[:FILTER_SEGMENTS]
        return [(str(pk), name) for pk, name in segments]

    def get_facet_counts(self, pk_attname: str, filtered_qs: QuerySet[Any]) -> dict[str, Any]:
        # "Show counts" would run every segment's rules over the contacts at once.
        return {}

    def queryset(self, request: HttpRequest, queryset: QuerySet[Contact]) -> QuerySet[Contact]:
        value = self.value()
        if not value:
            return queryset
        segment = Segment.objects.filter(pk=int(value)).first() if value.isdigit() else None
        if segment is None:
            messages.warning(request, "That segment no longer exists.")
            return queryset.none()
        try:
            return contacts_in_segment(queryset, segment.rules)
        except RuleError as exc:
            messages.error(request, f"The segment “{segment.name}” cannot be used now: {exc}")
            return queryset.none()
