"""Phone numbers in the admin: throughput, tier, quality and pause at a glance; resume and a
test send for operators.

Editing ``paused until`` pauses the number for real (the shared token bucket, which every
worker obeys, not just the row); "resume now" clears both. A test send goes through the
transactional API's own service (``delivery.numbers.phone_number_test_send``).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from campaigns.models import PhoneNumber, Template, TemplateStatus
from delivery.models import OPEN_STATUSES, Message, MessageKind
from delivery.numbers import (
    TEST_SEND_KEY_NAME,
    phone_number_pause,
    phone_number_pause_state,
    phone_number_resume,
    phone_number_test_send,
)
from whatsblast.core.secrets import Secret

SEND_TEST_PERMISSION = "campaigns.send_test_message"


class WriteOnlyField(forms.CharField):
    """A secret typed in, never rendered back; blank means "unchanged"."""

    widget = forms.PasswordInput(render_value=False)

    def has_changed(self, initial: Any, data: Any) -> bool:
        return bool(data)


class PhoneNumberAdminForm(forms.ModelForm[PhoneNumber]):
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
        help_texts = {
            "paused_until": "Every send from this number (campaign and transactional) stops "
            "until then. Use “Resume now” to lift a pause early.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Not even as the "initial" value: nothing of the token reaches the page.
        self.initial.pop("access_token", None)

    def clean_access_token(self) -> Secret:
        token = str(self.cleaned_data.get("access_token") or "").strip()
        if token:
            return Secret(token)
        if self.instance.pk:
            return Secret(self.instance.access_token.reveal())  # unchanged
        raise ValidationError("A new number needs its access token.")

    def clean_paused_until(self) -> Any:
        until = self.cleaned_data.get("paused_until")
        if until is not None and "paused_until" in self.changed_data and until <= timezone.now():
            raise ValidationError("A pause must end in the future (or be left empty).")
        return until


@admin.register(PhoneNumber)
class PhoneNumberAdmin(admin.ModelAdmin[PhoneNumber]):
    form = PhoneNumberAdminForm
    list_display = (
        "display_phone_number",
        "phone_number_id",
        "account",
        "tier",
        "rate_per_second",
        "transactional_reserve",
        "effective_rate_shown",
        "quality_rating",
        "paused",
        "graph_read_at",
    )
    list_filter = ("quality_rating", "account__messaging_limit_tier", "account")
    search_fields = ("display_phone_number", "phone_number_id")
    list_select_related = ("account",)
    ordering = ("display_phone_number",)
    readonly_fields = (
        "tier",
        "access_token_state",
        "effective_rate_shown",
        "pause_state",
        "quality_rating",
        "verified_name",
        "name_status",
        "throughput_level",
        "graph_read_at",
        "graph_read_result",
        "created_at",
        "updated_at",
    )
    fieldsets = (
        (None, {"fields": ("phone_number_id", "display_phone_number", "account", "tier")}),
        ("Cloud API", {"fields": ("access_token", "api_base_url")}),
        (
            "Throughput",
            {"fields": ("rate_per_second", "transactional_reserve", "effective_rate_shown")},
        ),
        ("Health", {"fields": ("quality_rating", "pause_state", "paused_until", "paused_reason")}),
        (
            "Read from Meta",
            {
                "fields": (
                    "verified_name",
                    "name_status",
                    "throughput_level",
                    "graph_read_at",
                    "graph_read_result",
                )
            },
        ),
        (None, {"fields": ("created_at", "updated_at")}),
    )
    actions = ("resume_numbers",)
    change_form_template = "admin/campaigns/phonenumber/change_form.html"

    def get_fieldsets(self, request: HttpRequest, obj: PhoneNumber | None = None) -> Any:
        """Those who may change the number replace its token; the others see only that it
        is set. Nobody, superusers included, is shown the token itself."""
        fieldsets = super().get_fieldsets(request, obj)
        if self.has_change_permission(request, obj) or obj is None:
            return fieldsets
        return [
            (
                name,
                {
                    **options,
                    "fields": tuple(
                        "access_token_state" if f == "access_token" else f
                        for f in options["fields"]
                    ),
                },
            )
            for name, options in fieldsets
        ]

    @admin.display(description="access token")
    def access_token_state(self, obj: PhoneNumber) -> str:
        return "Set (never shown)." if obj.access_token else "Not set."

    @admin.display(description="tier", ordering="account__messaging_limit_tier")
    def tier(self, obj: PhoneNumber) -> str:
        return obj.account.get_messaging_limit_tier_display() if obj.account_id else "-"

    @admin.display(description="effective rate (msg/s)", ordering="effective_rate")
    def effective_rate_shown(self, obj: PhoneNumber) -> str:
        if obj.effective_rate is None or obj.effective_rate >= obj.rate_per_second:
            return f"{obj.rate_per_second} (full rate)"
        return f"{obj.effective_rate:.1f} (lowered after throttling)"

    @admin.display(description="paused", ordering="paused_until")
    def paused(self, obj: PhoneNumber) -> str:
        if obj.paused_until is None or obj.paused_until <= timezone.now():
            return "-"
        until = timezone.localtime(obj.paused_until).strftime("%Y-%m-%d %H:%M")
        return f"until {until}: {obj.paused_reason}" if obj.paused_reason else f"until {until}"

    @admin.display(description="last read")
    def graph_read_result(self, obj: PhoneNumber) -> str:
        """What the last read of the number from Meta said; a number never read yet says
        so (an empty error there used to read "the token works")."""
        if obj.graph_read_at is None:
            return "Not read from Meta yet: the token has not been tried."
        if obj.graph_error:
            return f"Failed: {obj.graph_error}"
        return "Read without error: the token works."

    @admin.display(description="sending now")
    def pause_state(self, obj: PhoneNumber) -> str:
        if not obj.pk:
            return "-"
        state = phone_number_pause_state(phone_number=obj)
        if state.bucket_seconds is None and not state.paused:
            return "Unknown: the rate limiter (Redis) does not answer."
        if not state.paused:
            return "Sending."
        parts = []
        if state.until is not None and state.until > timezone.now():
            parts.append(f"Paused until {timezone.localtime(state.until):%Y-%m-%d %H:%M:%S}")
            if state.reason:
                parts.append(f"({state.reason})")
        if state.bucket_seconds:
            parts.append(f"— the rate limiter holds sends for {state.bucket_seconds:.0f} s more")
        return format_html("<strong>{}</strong>", " ".join(parts))

    def save_model(self, request: HttpRequest, obj: PhoneNumber, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if "paused_until" not in form.changed_data:
            return
        if obj.paused_until is None:
            phone_number_resume(phone_number=obj)
        else:
            phone_number_pause(phone_number=obj, until=obj.paused_until, reason=obj.paused_reason)

    # --- resume ------------------------------------------------------------------------------

    @admin.action(description="Resume selected numbers now", permissions=("change",))
    def resume_numbers(self, request: HttpRequest, queryset: Any) -> None:
        numbers = list(queryset)
        for number in numbers:
            phone_number_resume(phone_number=number)
            self.log_change(request, number, "Resumed now (pause cleared).")
        self.message_user(request, f"{len(numbers)} number(s) resumed.", messages.SUCCESS)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path(
                "<int:object_id>/resume/",
                view(self.resume_view),
                name="campaigns_phonenumber_resume",
            ),
            path(
                "<int:object_id>/test-send/",
                view(self.test_send_view),
                name="campaigns_phonenumber_test_send",
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
        number = PhoneNumber.objects.filter(pk=object_id).first() if object_id.isdigit() else None
        # "Resume now" only for a number that is paused (by its row or the rate limiter).
        extra["can_resume"] = (
            number is not None
            and self.has_change_permission(request, number)
            and phone_number_pause_state(phone_number=number).paused
        )
        extra["can_test_send"] = request.user.has_perm(SEND_TEST_PERMISSION)
        return super().change_view(request, object_id, form_url, extra)

    def resume_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        number = get_object_or_404(PhoneNumber, pk=object_id)
        if not self.has_change_permission(request, number):
            raise PermissionDenied
        if request.method == "POST":
            phone_number_resume(phone_number=number)
            self.log_change(request, number, "Resumed now (pause cleared).")
            self.message_user(request, f"{number} sends again now.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:campaigns_phonenumber_change", args=[number.pk]))

    # --- test send ---------------------------------------------------------------------------

    def test_send_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        if not request.user.has_perm(SEND_TEST_PERMISSION):
            raise PermissionDenied
        number = get_object_or_404(PhoneNumber.objects.select_related("account"), pk=object_id)
        form = TestSendForm(request.POST or None, number=number)
        if form.is_bound and form.is_valid():
            data = form.cleaned_data
            try:
                message = phone_number_test_send(
                    phone_number=number,
                    to=data["to"],
                    template=data["template"],
                    body_params=data["body_params"],
                    header=data["header"],
                    text=data["text"],
                )
            except ValidationError as exc:
                form.add_error(None, exc.messages)
            else:
                self.log_change(
                    request, number, f"Test send to {message.to}: message {message.pk}."
                )
                url = reverse("admin:campaigns_phonenumber_test_send", args=[number.pk])
                return HttpResponseRedirect(f"{url}?message={message.pk}")
        sent = _test_message(number, request.GET.get("message", ""))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Test send from {number}",
            "original": number,
            "number": number,
            "form": form,
            "sent": sent,
            # While it is still on its way, the page refreshes itself every two seconds.
            "refresh": sent is not None and sent.status in OPEN_STATUSES,
            "message_url": reverse("admin:delivery_message_change", args=[sent.pk])
            if sent is not None and request.user.has_perm("delivery.view_message")
            else "",
        }
        return TemplateResponse(request, "admin/campaigns/phonenumber/test_send.html", context)


def _test_message(number: PhoneNumber, message_id: str) -> Message | None:
    if not message_id.isdigit():
        return None
    return Message.objects.filter(
        pk=int(message_id),
        phone_number=number,
        kind=MessageKind.TRANSACTIONAL,
        api_key__name=TEST_SEND_KEY_NAME,
    ).first()


class TestSendForm(forms.Form):
    to = forms.CharField(
        label="To", max_length=32, help_text="The recipient in international form: +5511999990000"
    )
    template = forms.ModelChoiceField(
        queryset=Template.objects.none(),
        required=False,
        help_text="An approved template of this number's account; leave empty to send a text.",
    )
    body_params = forms.CharField(
        label="Body params",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 40}),
        help_text="One per line, in order ({{1}}, {{2}}...); name=value lines for named params.",
    )
    header = forms.CharField(
        required=False, max_length=1024, help_text="The header param, if the template takes one."
    )
    text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 40}),
        help_text="Free text: only within 24 h of the recipient's last message to this number.",
    )

    def __init__(self, *args: Any, number: PhoneNumber, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["template"].queryset = Template.objects.filter(  # type: ignore[attr-defined]
            account_id=number.account_id, status=TemplateStatus.APPROVED
        ).order_by("name", "language")

    def clean_body_params(self) -> list[str] | dict[str, str]:
        lines = [ln.strip() for ln in str(self.cleaned_data.get("body_params") or "").splitlines()]
        lines = [ln for ln in lines if ln]
        template = self.cleaned_data.get("template")
        if template is not None and template.body_param_names:
            named = dict(ln.partition("=")[::2] for ln in lines)
            return {k.strip(): v.strip() for k, v in named.items()}
        return lines

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("template") is None and not str(cleaned.get("text") or "").strip():
            raise ValidationError("Choose a template, or write a text.")
        if cleaned.get("template") is not None and str(cleaned.get("text") or "").strip():
            raise ValidationError("Send either a template or a text, not both.")
        return cleaned
