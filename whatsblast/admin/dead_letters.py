"""Dead letters for support: find them, see what was sent and how it failed, decide.

Requeue (fresh attempts) and discard (with a note) are bulk actions and buttons on the
detail page; both call ``delivery.dead_letters`` and need their own permissions
(``delivery.requeue_deadletter``, ``delivery.discard_deadletter``). Entries are never
edited or deleted by hand: the audit trail under each one says who decided what, and
each decision is in the entry's History and the home page's Recent actions.

A requeue is due now or at a time support picks. The detail page tells one account: what
happened when the message was dead-lettered, who requeued it and for when, and what the
fresh attempts gave. The same requeue is a Messages list action for failed messages that
never reached the dead letters (``FailedRequeueActions``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
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
from django.utils import timezone
from django.utils.formats import date_format

from campaigns.audience.phone_search import phone_search_candidates
from delivery.dead_letters import (
    NOTE_MAX_LENGTH,
    REQUEUED_OUTCOME,
    DeadLetterDecision,
    dead_letter_discard,
    dead_letter_request,
    dead_letter_requeue,
    dead_letter_summary,
    message_failed_requeue,
)
from delivery.models import DeadLetter, DeadLetterStatus, Message, MessageStatus
from whatsblast.admin.customer_links import customer_link
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


class DecisionForm(forms.Form):
    note = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        required=False,
        max_length=NOTE_MAX_LENGTH,
        help_text="Why: kept in the audit trail. Required to discard.",
    )


class RequeueForm(DecisionForm):
    """A requeue's note and when it is due: now, or at a time (in the viewer's zone)."""

    NOW, AT = "now", "at"
    when = forms.ChoiceField(
        choices=[(NOW, "Requeue now"), (AT, "Requeue at")],
        initial=NOW,
        widget=forms.RadioSelect,
        required=False,
    )
    at = forms.DateTimeField(
        required=False,
        label="Time",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"],
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("when") == self.AT and data.get("at") is None:
            self.add_error("at", "Give the time to requeue at, or choose Requeue now.")
        return data

    def due(self) -> datetime | None:
        """The chosen time, or None for now (a valid form only)."""
        return self.cleaned_data.get("at") if self.cleaned_data.get("when") == self.AT else None


@admin.register(DeadLetter)
class DeadLetterAdmin(LargeTableAdmin):
    list_display = (
        "recipient",
        "campaign",
        "error",
        "status",
        "created_at",
        "customer_page",
    )
    list_display_links = ("recipient",)
    list_filter = (OpenFirstStatusFilter, ErrorCodeFilter, "campaign", "phone_number")
    date_hierarchy = "created_at"
    # A number as people say it (national with a default country, spaces, dashes, with or
    # without +) or the contact's name (phone_search_candidates decides which).
    search_fields = ("=message__to",)
    search_help_text = (
        "A phone number as people say it ((11) 98765-4321, +55 11 98765-4321) or a name."
    )
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

    @admin.display(description="customer")
    def customer_page(self, obj: DeadLetter) -> str:
        return customer_link(obj.message.to, "Customer page")

    @admin.display(description="error", ordering="error_code")
    def error(self, obj: DeadLetter) -> str:
        return f"{obj.error_code} {obj.error_title}".strip() if obj.error_code else obj.error_title

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[DeadLetter], search_term: str
    ) -> tuple[QuerySet[DeadLetter], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        phones = phone_search_candidates(term)
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
        requeue = action == "requeue_selected"
        form_class = RequeueForm if requeue else DecisionForm
        form = form_class(request.POST if "confirm" in request.POST else None)
        if form.is_bound and form.is_valid():
            note = form.cleaned_data["note"].strip()
            if action == "discard_selected" and not note:
                form.add_error("note", "Say why these dead letters are discarded.")
            elif self._decide(request, action, list(queryset.values_list("id", flat=True)), form):
                return None  # back to the list, with the message
        across = request.POST.get("select_across") == "1"
        # Posted back as they came: the admin wants the page's ticked boxes even when the
        # action applies to everything the filters match.
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
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

    def _decide(self, request: HttpRequest, action: str, ids: list[int], form: Any) -> bool:
        note = form.cleaned_data["note"]
        try:
            if action == "requeue_selected":
                decision = dead_letter_requeue(
                    dead_letters=ids, user=request.user, note=note, at=form.due()
                )
                self._report(request, decision, "requeued")
            else:
                decision = dead_letter_discard(dead_letters=ids, user=request.user, note=note)
                self._report(request, decision, "discarded")
        except ValidationError as exc:
            self.message_user(request, " ".join(exc.messages), messages.ERROR)
            form.add_error(None, exc)
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
        account = requeue_account(letter, message)
        return {
            **account,
            "letter": letter,
            "message_obj": message,
            "message_url": reverse("admin:delivery_message_change", args=[message.pk])
            if request.user.has_perm("delivery.view_message")
            else "",
            "request_url": request_shown["url"],
            "request_body": json.dumps(request_shown["body"], indent=2, ensure_ascii=False),
            "attempts": _with_times(letter.attempts or message.error_history or []),
            "history_url": reverse("admin:delivery_deadletter_history", args=[letter.pk]),
            "trail": list(letter.actions.order_by("created_at", "id")),
            "earlier": list(
                DeadLetter.objects.filter(message=message)
                .exclude(pk=letter.pk)
                .order_by("-id")[:20]
            ),
            "can_requeue": is_open and self.has_requeue_permission(request),
            "can_discard": is_open and self.has_discard_permission(request),
            "decision_form": RequeueForm(),
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
        form = (RequeueForm if action == "requeue_selected" else DecisionForm)(request.POST)
        if not form.is_valid():
            problems = [str(m) for errors in form.errors.values() for m in errors]
            self.message_user(request, " ".join(problems), messages.ERROR)
        else:
            self._decide(request, action, [letter.pk], form)
        return HttpResponseRedirect(url)


# What the message is doing now, in words, for the account after a requeue.
_NOW_WORDS = {
    MessageStatus.PENDING: "waiting to be sent",
    MessageStatus.SENDING: "being sent",
    MessageStatus.UNKNOWN: "sent, waiting for Meta to confirm it arrived",
    MessageStatus.SENT: "sent",
    MessageStatus.DELIVERED: "delivered",
    MessageStatus.READ: "read",
    MessageStatus.FAILED: "failed again",
    MessageStatus.DEAD: "dead-lettered again",
    MessageStatus.SKIPPED: "skipped",
    MessageStatus.CANCELLED: "cancelled with its campaign",
}


def requeue_account(letter: DeadLetter, message: Message) -> dict[str, Any]:
    """One account of the entry: the dead-letter time, the requeue (when, by whom, due
    when) and what the fresh attempts gave, each with its time.

    The attempts since come from the message's history after this entry's requeue (the
    first requeue line after the entry was made) up to the next one; the state now from
    the row, whose send identity and times the requeue cleared, so a "read" is the new
    send's own. When the message was requeued again after dying again, this entry's story
    ends at the next dead letter.
    """
    account: dict[str, Any] = {
        "requeued": letter.status == DeadLetterStatus.REQUEUED,
        "requeue": None,
        "since_requeue": [],
        "attempts_since": 0,
        "now_line": "",
        "now_status": message.get_status_display(),
        "later_letter": None,
    }
    if not account["requeued"]:
        return account
    history = [dict(a) for a in message.error_history or []]
    marks = [i for i, a in enumerate(history) if a.get("outcome") == REQUEUED_OUTCOME]
    mine = next((i for i in marks if _at(history[i]) >= letter.created_at), None)
    if mine is None and marks:  # entries from before the requeue line carried its time
        mine = marks[-1]
    later = [i for i in marks if mine is not None and i > mine]
    end = later[0] if later else len(history)
    mark = history[mine] if mine is not None else {}
    due_at = _parsed(mark.get("due_at"))
    account["requeue"] = {
        "at": letter.resolved_at,
        "by": letter.resolved_by.get_username() if letter.resolved_by else "system",
        # Due later than the requeue itself: "requeue at" was chosen.
        "due_later": bool(due_at and due_at > _at(mark) + timedelta(seconds=1)),
        "due_at": _when(due_at),
        "note": letter.note,
    }
    start = len(history) if mine is None else mine + 1
    since = [a for a in history[start:end] if a.get("attempt")]
    account["since_requeue"] = _with_times(since)
    account["attempts_since"] = len(since)
    later_letter = (
        DeadLetter.objects.filter(message=message, created_at__gt=letter.created_at)
        .order_by("created_at", "id")
        .first()
    )
    if later or later_letter is not None:
        # Dead again after this requeue: this entry's story ends there.
        account["later_letter"] = later_letter
        account["now_status"] = "Dead-lettered again"
        account["now_line"] = (
            f"dead-lettered again {_when(later_letter.created_at)}"
            if later_letter
            else "dead-lettered again"
        )
        return account
    sent = message.status in (MessageStatus.SENT, MessageStatus.DELIVERED, MessageStatus.READ)
    if sent and message.sent_at is not None:
        account["since_requeue"].append(
            {
                "attempt": message.attempt or len(since) + 1,
                "at": message.sent_at,
                "outcome": "sent: Meta accepted it",
                "http_status": 200,
                "code": None,
                "title": "",
            }
        )
        account["attempts_since"] = max(message.attempt, len(since) + 1)
    account["now_line"] = _now_line(message)
    return account


def _now_line(message: Message) -> str:
    """Where the message is now, with the times that say how it got there."""
    words = _NOW_WORDS.get(MessageStatus(message.status), message.get_status_display().lower())
    if message.status == MessageStatus.PENDING:
        return f"{words}, due {_when(message.next_attempt_at)}"
    if message.status in (MessageStatus.SENT, MessageStatus.DELIVERED, MessageStatus.READ):
        steps = [("sent", message.sent_at), ("delivered", message.delivered_at)]
        steps.append(("read", message.read_at))
        told = [f"{name} {_when(at)}" for name, at in steps if at is not None]
        return "; ".join(told) if told else words
    if message.status in (MessageStatus.FAILED, MessageStatus.DEAD):
        error = f"{message.last_error_code or ''} {message.last_error_title}".strip()
        at = f" {_when(message.failed_at)}" if message.failed_at else ""
        return f"{words}{at}" + (f": {error}" if error else "")
    return words


def _when(at: datetime | None) -> str:
    """A time as every page shows one: in the viewer's zone, to the second, zone named."""
    if at is None:
        return "-"
    return date_format(timezone.localtime(at), "Y-m-d H:i:s T")


def _parsed(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def _at(entry: dict[str, Any]) -> datetime:
    return _parsed(entry.get("at")) or datetime.min.replace(tzinfo=UTC)


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


class FailedRequeueActions:
    """The Messages list's action for failed messages that never reached the dead letters:
    the same requeue (now or at a time, with a note), the same permission, and each row
    refused named with its reason."""

    actions: Sequence[Any] | None = ("requeue_failed_selected",)
    opts: Any
    admin_site: Any
    media: Any

    def has_requeue_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("delivery.requeue_deadletter"))

    @admin.action(
        description="Requeue selected failed messages (fresh attempts)", permissions=("requeue",)
    )
    def requeue_failed_selected(
        self, request: HttpRequest, queryset: QuerySet[Message]
    ) -> HttpResponse | None:
        form = RequeueForm(request.POST if "confirm" in request.POST else None)
        if form.is_bound and form.is_valid():
            try:
                result = message_failed_requeue(
                    messages=list(queryset.values_list("id", flat=True)[:10_000]),
                    user=request.user,
                    note=form.cleaned_data["note"],
                    at=form.due(),
                )
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                level = messages.SUCCESS if result.requeued else messages.WARNING
                if result.requeued and result.refused:
                    level = messages.WARNING
                messages.add_message(request, level, result.summary())
                return None
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        across = request.POST.get("select_across") == "1"
        failed = queryset.filter(status=MessageStatus.FAILED)[:10_001].count()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Requeue failed messages",
            "action": "requeue_failed_selected",
            "form": form,
            "select_across": across,
            "selected": selected,
            "count": None if across else len(selected),
            "failed_count": failed,
            "media": self.media,
        }
        return TemplateResponse(request, "admin/delivery/deadletter/requeue_failed.html", context)
