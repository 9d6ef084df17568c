"""Dead letters for support: find them, see what was sent and how it failed, decide.

Requeue (fresh attempts) and discard (with a note) are bulk actions and buttons on the
detail page; both call ``delivery.dead_letters`` and need their own permissions
(``delivery.requeue_deadletter``, ``delivery.discard_deadletter``). Entries are never
edited or deleted by hand: the audit trail under each one says who decided what.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from delivery.dead_letters import (
    NOTE_MAX_LENGTH,
    DeadLetterDecision,
    dead_letter_discard,
    dead_letter_request,
    dead_letter_requeue,
    dead_letter_summary,
)
from delivery.models import DeadLetter, DeadLetterStatus, Message
from whatsblast.admin.pagination import LargeTableAdmin


class ErrorCodeFilter(admin.SimpleListFilter):
    title = "error code"
    parameter_name = "error_code"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # One DISTINCT ON over the code index: every code present, with a title seen for it.
        rows = (
            DeadLetter.objects.order_by("error_code")
            .distinct("error_code")
            .values_list("error_code", "error_title")
        )
        return [
            (str(code) if code is not None else "none", f"{code} {title}".strip())
            for code, title in rows
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> Any:
        value = self.value()
        if value is None:
            return queryset
        if value == "none":
            return queryset.filter(error_code__isnull=True)
        try:
            return queryset.filter(error_code=int(value))
        except ValueError:
            return queryset.none()


class OpenFirstStatusFilter(admin.SimpleListFilter):
    """The list opens on the dead letters still to decide; "All" is one click away."""

    title = "status"
    parameter_name = "status__exact"
    ALL = "all"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(value), str(label)) for value, label in DeadLetterStatus.choices]

    def value(self) -> str:
        return str(super().value() or DeadLetterStatus.OPEN)

    def queryset(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> Any:
        value = self.value()
        if value == self.ALL:
            return queryset
        if value not in DeadLetterStatus.values:
            return queryset.none()
        return queryset.filter(status=value)

    def choices(self, changelist: Any) -> Any:
        value = self.value()
        yield {
            "selected": value == self.ALL,
            "query_string": changelist.get_query_string({self.parameter_name: self.ALL}),
            "display": "All",
        }
        for lookup, title in self.lookup_choices:
            yield {
                "selected": value == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }


def phone_search_forms(term: str) -> list[str]:
    """The E.164 forms a typed number may mean: "+55 (11) 98888-7777", "5511988887777" and
    "+5511988887777" are one recipient."""
    digits = "".join(c for c in term if c.isdigit())
    if len(digits) < 6 or any(c.isalpha() for c in term):
        return []
    if term.strip().startswith("00"):
        digits = digits[2:]
    return [f"+{digits}"]


class DecisionForm(forms.Form):
    note = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        required=False,
        max_length=NOTE_MAX_LENGTH,
        help_text="Why: kept in the audit trail. Required to discard.",
    )


@admin.register(DeadLetter)
class DeadLetterAdmin(LargeTableAdmin):
    list_display = (
        "recipient",
        "campaign",
        "error",
        "status",
        "created_at",
    )
    list_display_links = ("recipient",)
    list_filter = (OpenFirstStatusFilter, ErrorCodeFilter, "campaign", "phone_number")
    date_hierarchy = "created_at"
    # A number in any format (digits, spaces, dashes, with or without +) or the contact's
    # name; the number through the recipient's index, the name through the contact's.
    search_fields = ("=message__to",)
    search_help_text = "A phone number in any format (+55 11 98888-7777, 5511988887777) or a name."
    list_select_related = ("message", "campaign", "phone_number")
    ordering = ("-created_at", "-id")
    actions = ("requeue_selected", "discard_selected")
    change_form_template = "admin/delivery/deadletter/change_form.html"
    change_list_template = "admin/delivery/deadletter/change_list.html"
    readonly_fields = (
        "message",
        "campaign",
        "phone_number",
        "error_code",
        "error_title",
        "status",
        "created_at",
        "resolved_at",
        "resolved_by",
        "note",
    )
    fieldsets = (
        (None, {"fields": (("message", "campaign", "phone_number"),)}),
        (None, {"fields": (("error_code", "error_title"),)}),
        (None, {"fields": (("status", "created_at", "resolved_at", "resolved_by"), "note")}),
    )

    @admin.display(description="recipient", ordering="message__to")
    def recipient(self, obj: DeadLetter) -> str:
        return obj.message.to

    @admin.display(description="error", ordering="error_code")
    def error(self, obj: DeadLetter) -> str:
        return f"{obj.error_code} {obj.error_title}".strip() if obj.error_code else obj.error_title

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[DeadLetter], search_term: str
    ) -> tuple[QuerySet[DeadLetter], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        phones = phone_search_forms(term)
        if phones:
            return queryset.filter(message__to__in=phones), False
        return queryset.filter(message__contact__name__icontains=term), False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The list, under a summary of the entries its status filter shows: by error
        (each code a link to its entries) and per day over the last two weeks."""
        chosen = request.GET.get(OpenFirstStatusFilter.parameter_name) or DeadLetterStatus.OPEN
        status = None if chosen == OpenFirstStatusFilter.ALL else chosen
        summary = dead_letter_summary(status=status if status in DeadLetterStatus.values else None)
        peak = max((d["count"] for d in summary["per_day"]), default=0)
        for day in summary["per_day"]:
            day["height"] = round(100 * day["count"] / peak) if peak else 0
        extra = {
            **(extra_context or {}),
            "title": "Dead letters",
            "summary": summary,
            "summary_status": chosen,
        }
        return super().changelist_view(request, extra)

    # --- permissions ---------------------------------------------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # decided through requeue / discard, never edited

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the audit trail hangs off the entry

    def has_requeue_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("delivery.requeue_deadletter"))

    def has_discard_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("delivery.discard_deadletter"))

    # --- bulk actions: a confirmation page with the note, then the service -----------------

    @admin.action(
        description="Requeue selected dead letters (fresh attempts)", permissions=("requeue",)
    )
    def requeue_selected(
        self, request: HttpRequest, queryset: QuerySet[DeadLetter]
    ) -> HttpResponse | None:
        return self._bulk_decision(request, queryset, action="requeue_selected")

    @admin.action(
        description="Discard selected dead letters (with a note)", permissions=("discard",)
    )
    def discard_selected(
        self, request: HttpRequest, queryset: QuerySet[DeadLetter]
    ) -> HttpResponse | None:
        return self._bulk_decision(request, queryset, action="discard_selected")

    def _bulk_decision(
        self, request: HttpRequest, queryset: QuerySet[DeadLetter], *, action: str
    ) -> HttpResponse | None:
        form = DecisionForm(request.POST if "confirm" in request.POST else None)
        if form.is_bound and form.is_valid():
            note = form.cleaned_data["note"].strip()
            if action == "discard_selected" and not note:
                form.add_error("note", "Say why these dead letters are discarded.")
            elif self._decide(request, action, list(queryset.values_list("id", flat=True)), note):
                return None  # back to the list, with the message
        across = request.POST.get("select_across") == "1"
        # Posted back as they came: the admin wants the page's ticked boxes even when the
        # action applies to everything the filters match.
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        requeue = action == "requeue_selected"
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Requeue dead letters" if requeue else "Discard dead letters",
            "action": action,
            "form": form,
            "select_across": across,
            "selected": selected,
            "count": None if across else len(selected),
            "media": self.media,
        }
        open_count = queryset.filter(status=DeadLetterStatus.OPEN)[:10_001].count()
        decided = queryset.exclude(status=DeadLetterStatus.OPEN)[:10_001].count()
        context.update(open_count=open_count, decided_count=decided, all_open=not decided)
        return TemplateResponse(request, "admin/delivery/deadletter/decide.html", context)

    def _decide(self, request: HttpRequest, action: str, ids: list[int], note: str) -> bool:
        try:
            if action == "requeue_selected":
                decision = dead_letter_requeue(dead_letters=ids, user=request.user, note=note)
                self._report(request, decision, "requeued")
            else:
                decision = dead_letter_discard(dead_letters=ids, user=request.user, note=note)
                self._report(request, decision, "discarded")
        except ValidationError as exc:
            self.message_user(request, " ".join(exc.messages), messages.ERROR)
            return False
        return True

    def _report(self, request: HttpRequest, decision: DeadLetterDecision, verb: str) -> None:
        level = messages.SUCCESS if decision.done else messages.WARNING
        self.message_user(request, decision.summary(verb), level)

    # --- detail page: the message, its request, its attempts, the trail, the buttons -------

    def get_urls(self) -> list[URLPattern]:
        info = f"{self.opts.app_label}_{self.opts.model_name}"
        own = [
            path(
                "<int:object_id>/requeue/",
                self.admin_site.admin_view(self.requeue_view),
                name=f"{info}_requeue",
            ),
            path(
                "<int:object_id>/discard/",
                self.admin_site.admin_view(self.discard_view),
                name=f"{info}_discard",
            ),
        ]
        return own + super().get_urls()

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        letter = (
            DeadLetter.objects.select_related(
                "message__phone_number", "message__template", "message__campaign"
            )
            .filter(pk=object_id)
            .first()
            if object_id.isdigit()
            else None
        )
        extra: dict[str, Any] = dict(extra_context or {})
        if letter is not None:
            extra.update(self._detail_context(request, letter))
        return super().change_view(request, object_id, form_url, extra)

    def _detail_context(self, request: HttpRequest, letter: DeadLetter) -> dict[str, Any]:
        message: Message = letter.message
        request_shown = dead_letter_request(message=message)
        is_open = letter.status == DeadLetterStatus.OPEN
        return {
            "letter": letter,
            "message_obj": message,
            "message_url": reverse("admin:delivery_message_change", args=[message.pk])
            if request.user.has_perm("delivery.view_message")
            else "",
            "request_url": request_shown["url"],
            "request_body": json.dumps(request_shown["body"], indent=2, ensure_ascii=False),
            "attempts": _with_times(letter.attempts or message.error_history or []),
            # After a requeue the message lives on: its attempts since, and where it is now.
            "requeued": letter.status == DeadLetterStatus.REQUEUED,
            "since_requeue": _since_requeue(letter, message),
            "trail": list(letter.actions.order_by("created_at", "id")),
            "earlier": list(
                DeadLetter.objects.filter(message=message)
                .exclude(pk=letter.pk)
                .order_by("-id")[:20]
            ),
            "can_requeue": is_open and self.has_requeue_permission(request),
            "can_discard": is_open and self.has_discard_permission(request),
            "decision_form": DecisionForm(),
        }

    def requeue_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        if not self.has_requeue_permission(request):
            raise PermissionDenied
        return self._single_decision(request, object_id, "requeue_selected")

    def discard_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        if not self.has_discard_permission(request):
            raise PermissionDenied
        return self._single_decision(request, object_id, "discard_selected")

    def _single_decision(self, request: HttpRequest, object_id: int, action: str) -> HttpResponse:
        letter = get_object_or_404(DeadLetter, pk=object_id)
        url = reverse("admin:delivery_deadletter_change", args=[letter.pk])
        if request.method != "POST":
            return HttpResponseRedirect(url)
        form = DecisionForm(request.POST)
        if not form.is_valid():
            self.message_user(request, "The note is too long.", messages.ERROR)
        else:
            self._decide(request, action, [letter.pk], form.cleaned_data["note"])
        return HttpResponseRedirect(url)


def _since_requeue(letter: DeadLetter, message: Message) -> list[dict[str, Any]]:
    """Attempts of the message after this entry was requeued: its later errors, and the
    send that went through when it did."""
    if letter.status != DeadLetterStatus.REQUEUED or letter.resolved_at is None:
        return []
    history = list(message.error_history or [])
    # The requeue leaves a marker in the history ("requeued by support"): what follows the
    # last one are the attempts since.
    marks = [i for i, a in enumerate(history) if str(a.get("outcome", "")).startswith("requeued")]
    rows: list[dict[str, Any]] = [dict(a) for a in history[marks[-1] + 1 :]] if marks else []
    if message.sent_at is not None and message.sent_at >= letter.resolved_at:
        rows.append(
            {
                "attempt": message.attempt,
                "at": message.sent_at,
                "outcome": f"sent, now {message.get_status_display().lower()}",
                "http_status": 200,
                "code": None,
                "title": "",
            }
        )
    return _with_times(rows)


def _with_times(attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Attempts with their ISO ``at`` read back as a time, shown like every other time."""
    shown = []
    for attempt in attempts:
        row = dict(attempt)
        if isinstance(row.get("at"), str):
            try:
                row["at"] = datetime.fromisoformat(row["at"])
            except ValueError:
                pass
        shown.append(row)
    return shown
