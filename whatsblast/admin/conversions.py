"""Conversions in the admin: a read-only list (Marketing and Support) and an upload of a
CSV file of conversions (Marketing), stored and attributed by
``delivery.engagement.conversions`` exactly as the API's are."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from delivery.engagement.conversions import UploadError, conversions_from_csv
from delivery.models import Conversion

# A file of a few hundred thousand conversions; larger ones go through the API in batches.
MAX_UPLOAD_BYTES = 20 * 1024 * 1024
# Bad rows listed on the result page; the count says how many there were in all.
LISTED_BAD_ROWS = 200
UPLOAD_PERMISSION = "delivery.add_conversion"


class ConversionUploadForm(forms.Form):
    file = forms.FileField(
        label="CSV file",
        help_text="Columns: phone or user_id, event, value, currency, occurred_at (ISO 8601 "
        "with its offset, e.g. 2026-05-01T14:30:00-03:00). Header names in any case.",
    )

    def clean_file(self) -> Any:
        file = self.cleaned_data["file"]
        if file.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(
                f"The file is over {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB: send it in parts, "
                "or through the API."
            )
        return file


@admin.register(Conversion)
class ConversionAdmin(admin.ModelAdmin[Conversion]):
    """Read-only: conversions come from the API and uploads, and are never edited here."""

    list_display = (
        "occurred_at",
        "event",
        "value",
        "currency",
        "phone",
        "user_id",
        "campaign",
        "attributed_by",
        "source",
    )
    list_filter = ("source", "attributed_by", "currency")
    search_fields = ("=phone", "=user_id", "=event")
    list_select_related = ("campaign",)
    date_hierarchy = "occurred_at"
    ordering = ("-occurred_at", "-id")
    show_full_result_count = False
    raw_id_fields = ("contact", "message", "campaign")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # added by the upload page, not the change form

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra_context = {
            **(extra_context or {}),
            "can_upload": request.user.has_perm(UPLOAD_PERMISSION),
        }
        return super().changelist_view(request, extra_context)

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "upload/",
                self.admin_site.admin_view(self.upload_view),
                name="delivery_conversion_upload",
            ),
            *super().get_urls(),
        ]

    def upload_view(self, request: HttpRequest) -> HttpResponse:
        if not request.user.has_perm(UPLOAD_PERMISSION):
            raise PermissionDenied
        form = ConversionUploadForm(request.POST or None, request.FILES or None)
        outcome = None
        if request.method == "POST" and form.is_valid():
            try:
                outcome = conversions_from_csv(form.cleaned_data["file"])
            except UploadError as exc:
                form.add_error("file", str(exc))
            else:
                result = outcome.result
                messages.success(
                    request,
                    f"{result.stored:,} conversions stored ({result.attributed:,} attributed, "
                    f"{result.holdout:,} to a holdout, {result.unmatched:,} of unknown people); "
                    f"{result.duplicates:,} already stored; {result.rejected:,} bad rows.",
                )
                if not outcome.bad_rows:
                    return redirect(reverse("admin:delivery_conversion_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Upload conversions (CSV)",
            "form": form,
            "outcome": outcome,
            "bad_rows": outcome.bad_rows[:LISTED_BAD_ROWS] if outcome else [],
        }
        return TemplateResponse(request, "admin/delivery/conversion/upload.html", context)
