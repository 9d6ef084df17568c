"""Admin for API keys: shown once on creation (in a message), only the hash stored."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from delivery.api.keys import api_key_issue, api_key_revoke
from delivery.models import ApiKey, ApiScope


class ApiKeyAdminForm(forms.ModelForm[ApiKey]):
    scopes = forms.MultipleChoiceField(
        choices=ApiScope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[ApiScope.SEND],
        help_text="What the key may do. read: read contacts, lists, segments, templates, "
        "campaigns and message status, and change nothing.",
    )

    class Meta:
        model = ApiKey
        fields = ("name", "scopes", "phone_numbers", "all_numbers", "requests_per_second")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        needs_numbers = {ApiScope.SEND, ApiScope.CAMPAIGNS} & set(cleaned.get("scopes") or [])
        if needs_numbers and not cleaned.get("all_numbers") and not cleaned.get("phone_numbers"):
            raise forms.ValidationError(
                "A key that sends or runs campaigns needs its phone numbers, or all numbers."
            )
        return cleaned


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin[ApiKey]):
    """Keys are shown once, on creation, in a message; only their hash is stored."""

    form = ApiKeyAdminForm
    list_display = (
        "name",
        "prefix",
        "scopes",
        "all_numbers",
        "requests_per_second",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "all_numbers")
    search_fields = ("name", "=prefix")
    filter_horizontal = ("phone_numbers",)
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    ordering = ("-created_at",)
    actions = ("revoke_keys",)

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        raw_key = None if change else api_key_issue(obj)
        super().save_model(request, obj, form, change)
        if raw_key is not None:
            messages.warning(
                request,
                f"API key for {obj.name}: {raw_key} — copy it now; it is not shown again.",
            )

    def has_delete_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        return False  # revoke instead: the messages sent with a key keep pointing at it

    @admin.action(description="Revoke selected API keys")
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        count = 0
        for api_key in queryset.filter(revoked_at__isnull=True):
            api_key_revoke(api_key_id=api_key.pk)
            count += 1
        messages.success(request, f"Revoked {count} API key(s).")
