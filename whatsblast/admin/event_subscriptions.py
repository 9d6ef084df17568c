"""Event subscriptions for operators: where events go, how far behind each one is, pause
and resume, and its dead letters with a Replay button.

The signing secret is made by ``delivery.events.subscriptions.subscription_create`` and
shown once, in a message on the page after the add form (as API keys are); no page shows
it again, not even to a superuser. Support may look (view permission); pausing, resuming
and replaying need the change permission (Operators).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Greatest
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString

from delivery.events.subscriptions import (
    dead_letters_replay,
    subscription_create,
    subscription_pause,
    subscription_ping,
    subscription_resume,
    url_errors,
)
from delivery.events.types import EVENT_TYPES, event_types_errors
from delivery.models import Event, EventDeadLetter, EventSubscription
from journeys.running import emitted_event_types

# Dead letters listed on a subscription's page (newest event first); the counts cover all.
DEAD_LETTERS_SHOWN = 100
PAUSE_REASON_MAX = 500


def _type_choices() -> list[tuple[str, SafeString]]:
    """whatsblast's own event types, then those journeys' emit steps send out."""
    return [
        (name, format_html("<code>{}</code> — {}", name, description))
        for name, description in {**EVENT_TYPES, **emitted_event_types()}.items()
    ]


class EventSubscriptionForm(forms.ModelForm[EventSubscription]):
    url = forms.URLField(
        label="URL",
        max_length=2000,
        assume_scheme="https",
        widget=forms.URLInput(attrs={"class": "vURLField", "size": 80}),
        help_text="Where each batch is POSTed (http:// or https://), signed with the secret.",
    )
    event_types = forms.MultipleChoiceField(
        choices=_type_choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every type, including types added later.",
    )

    class Meta:
        model = EventSubscription
        fields = ("name", "url", "event_types")

    def clean_url(self) -> str:
        url = str(self.cleaned_data.get("url") or "")
        error = url_errors(url)
        if error:
            raise forms.ValidationError(error)
        return url

    def clean_event_types(self) -> list[str]:
        chosen = list(self.cleaned_data.get("event_types") or [])
        error = event_types_errors(chosen)
        if error:
            raise forms.ValidationError(error)
        return sorted(set(chosen))


def backlog_estimate() -> Any:
    """Events after the subscription's cursor: exact for a subscription to every type, an
    upper bound for one to some types (the events of other types after it count too).
    The newest ``seq`` is one uncorrelated subquery: PostgreSQL reads it once per page."""
    newest = Subquery(Event.objects.order_by("-seq").values("seq")[:1])
    return Greatest(Coalesce(newest, Value(0)) - F("cursor"), Value(0))


@admin.register(EventSubscription)
class EventSubscriptionAdmin(admin.ModelAdmin[EventSubscription]):
    form = EventSubscriptionForm
    # Failing since goes with the state, the last delivery with the count delivered: the
    # list stays readable beside the sidebar at a laptop's width.
    list_display = (
        "name",
        "url_shown",
        "types_shown",
        "state",
        "backlog",
        "delivered",
        "last_error_shown",
        "dead_letters_waiting",
    )
    search_fields = ("name", "url")
    ordering = ("name", "id")
    actions = ("pause_subscriptions", "resume_subscriptions")
    readonly_fields = (
        "state",
        "backlog_exact",
        "last_delivered_at",
        "failing_since",
        "attempts",
        "next_attempt_at",
        "last_error",
        "delivered_total",
        "cursor",
        "secret_state",
        "created_by",
        "created_at",
    )
    change_form_template = "admin/delivery/eventsubscription/change_form.html"

    def get_fieldsets(self, request: HttpRequest, obj: EventSubscription | None = None) -> Any:
        if obj is None:
            return ((None, {"fields": ("name", "url", "event_types")}),)
        return (
            (None, {"fields": ("name", "url", "event_types", "secret_state")}),
            (
                "Delivery",
                {
                    "fields": (
                        "state",
                        "backlog_exact",
                        "last_delivered_at",
                        "delivered_total",
                        "failing_since",
                        "attempts",
                        "next_attempt_at",
                        "last_error",
                        "cursor",
                    )
                },
            ),
            (None, {"fields": ("created_by", "created_at")}),
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[EventSubscription]:
        waiting = (
            EventDeadLetter.objects.filter(subscription=OuterRef("pk"), replayed_at__isnull=True)
            .order_by()
            .values("subscription")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return (
            super()
            .get_queryset(request)
            .annotate(
                backlog_estimate=backlog_estimate(),
                dead_letters_waiting_count=Coalesce(Subquery(waiting), Value(0)),
            )
        )

    # --- columns -----------------------------------------------------------------------------

    @admin.display(description="event types")
    def types_shown(self, obj: EventSubscription) -> str:
        return ", ".join(obj.event_types) if obj.event_types else "all"

    @admin.display(description="state", ordering="active")
    def state(self, obj: EventSubscription) -> str:
        if not obj.active:
            reason = obj.paused_reason
            if not reason:
                return "Paused"
            if reason.startswith("Paused after failing"):
                # The deliverer's "Paused after failing for 1 h 0 min: <error>": the error
                # is in its own column (and in full on the subscription's page).
                return reason.split(": ", 1)[0]
            return f"Paused: {reason}"
        if obj.failing_since:
            return f"Failing since {_when(obj.failing_since)} (retrying)"
        return "Active"

    @admin.display(description="backlog", ordering="backlog_estimate")
    def backlog(self, obj: EventSubscription) -> str:
        estimate = int(getattr(obj, "backlog_estimate", 0) or 0)
        if obj.event_types and estimate:
            return f"≤ {estimate:,}"  # other types after the cursor count too
        return f"{estimate:,}"

    @admin.display(description="URL", ordering="url")
    def url_shown(self, obj: EventSubscription) -> str:
        return obj.url if len(obj.url) <= 48 else obj.url[:47] + "…"

    @admin.display(description="delivered", ordering="delivered_total")
    def delivered(self, obj: EventSubscription) -> SafeString:
        last = f"last {_when(obj.last_delivered_at)}" if obj.last_delivered_at else "none yet"
        return format_html('{}<br><span class="quiet">{}</span>', f"{obj.delivered_total:,}", last)

    @admin.display(description="events waiting")
    def backlog_exact(self, obj: EventSubscription) -> str:
        waiting = Event.objects.filter(seq__gt=obj.cursor)
        if obj.event_types:
            waiting = waiting.filter(event_type__in=obj.event_types)
        return f"{waiting.count():,}"

    @admin.display(description="last error")
    def last_error_shown(self, obj: EventSubscription) -> str:
        if not obj.last_error:
            return "-"
        return obj.last_error if len(obj.last_error) <= 60 else obj.last_error[:59] + "…"

    @admin.display(description="dead letters", ordering="dead_letters_waiting_count")
    def dead_letters_waiting(self, obj: EventSubscription) -> int:
        return int(getattr(obj, "dead_letters_waiting_count", 0) or 0)

    @admin.display(description="signing secret")
    def secret_state(self, obj: EventSubscription) -> str:
        return "Set (shown once, when the subscription was created)."

    @admin.display(description="created by")
    def created_by(self, obj: EventSubscription) -> str:
        if obj.api_key_id is None:
            return "the admin"
        return f"API key {obj.api_key}" if obj.api_key else "an API key"

    # --- create: the secret once -------------------------------------------------------------

    def save_model(
        self, request: HttpRequest, obj: EventSubscription, form: Any, change: bool
    ) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        created, secret = subscription_create(
            name=obj.name, url=obj.url, event_types=list(obj.event_types)
        )
        # The admin goes on with ``obj`` (log entry, redirect): make it the row just made.
        for field in EventSubscription._meta.concrete_fields:
            setattr(obj, field.attname, getattr(created, field.attname))
        obj._state.adding = False
        messages.warning(
            request,
            format_html(
                'Signing secret for “{}”: <code id="wb-event-secret">{}</code> — copy it '
                "now; it is not shown again.",
                obj.name,
                secret,
            ),
        )

    # --- pause, resume, replay, ping ---------------------------------------------------------

    @admin.action(description="Pause selected subscriptions", permissions=("change",))
    def pause_subscriptions(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        chosen = list(queryset.filter(active=True))
        for subscription in chosen:
            subscription_pause(subscription=subscription, reason=_paused_by(request))
            self.log_change(request, subscription, "Paused.")
        self.message_user(request, f"{len(chosen)} subscription(s) paused.", messages.SUCCESS)

    @admin.action(description="Resume selected subscriptions", permissions=("change",))
    def resume_subscriptions(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        chosen = list(queryset.filter(active=False))
        for subscription in chosen:
            subscription_resume(subscription=subscription)
            self.log_change(request, subscription, "Resumed.")
        self.message_user(request, f"{len(chosen)} subscription(s) resumed.", messages.SUCCESS)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path(
                "<int:object_id>/pause/",
                view(self.pause_view),
                name="delivery_eventsubscription_pause",
            ),
            path(
                "<int:object_id>/resume/",
                view(self.resume_view),
                name="delivery_eventsubscription_resume",
            ),
            path(
                "<int:object_id>/replay/",
                view(self.replay_view),
                name="delivery_eventsubscription_replay",
            ),
            path(
                "<int:object_id>/ping/",
                view(self.ping_view),
                name="delivery_eventsubscription_ping",
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
        subscription = (
            EventSubscription.objects.filter(pk=object_id).first() if object_id.isdigit() else None
        )
        if subscription is not None:
            letters = EventDeadLetter.objects.filter(subscription=subscription)
            counts = letters.aggregate(
                total=Count("pk"), waiting=Count("pk", filter=Q(replayed_at__isnull=True))
            )
            extra.update(
                subscription=subscription,
                can_act=self.has_change_permission(request, subscription),
                dead_letters=list(
                    letters.select_related("event").order_by("-event_id")[:DEAD_LETTERS_SHOWN]
                ),
                dead_letters_total=counts["total"],
                dead_letters_waiting=counts["waiting"],
                dead_letters_shown=DEAD_LETTERS_SHOWN,
            )
        return super().change_view(request, object_id, form_url, extra)

    def _acted_on(self, request: HttpRequest, object_id: int) -> EventSubscription:
        subscription = get_object_or_404(EventSubscription, pk=object_id)
        if not self.has_change_permission(request, subscription):
            raise PermissionDenied
        return subscription

    def _done(
        self, request: HttpRequest, subscription: EventSubscription, change: str, outcome: str
    ) -> None:
        """Record ``change`` in the subscription's history and tell the user its ``outcome``."""
        self.log_change(request, subscription, change)
        self.message_user(request, f"“{subscription}” {outcome}", messages.SUCCESS)

    def _back(self, subscription: EventSubscription) -> HttpResponseRedirect:
        return HttpResponseRedirect(
            reverse("admin:delivery_eventsubscription_change", args=[subscription.pk])
        )

    def pause_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        subscription = self._acted_on(request, object_id)
        if request.method == "POST" and subscription.active:
            reason = str(request.POST.get("reason") or "").strip()[:PAUSE_REASON_MAX]
            subscription_pause(subscription=subscription, reason=reason or _paused_by(request))
            self._done(request, subscription, "Paused.", "is paused: nothing is sent to it.")
        return self._back(subscription)

    def resume_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        subscription = self._acted_on(request, object_id)
        if request.method == "POST" and not subscription.active:
            subscription_resume(subscription=subscription)
            self._done(
                request,
                subscription,
                "Resumed.",
                "resumed: deliveries carry on from where it stopped.",
            )
        return self._back(subscription)

    def ping_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        subscription = self._acted_on(request, object_id)
        if request.method != "POST":
            return self._back(subscription)
        error = subscription_ping(subscription=subscription)
        if error:
            self.message_user(
                request, f"The receiver did not take the test event: {error}", messages.ERROR
            )
        else:
            self._done(
                request,
                subscription,
                "Sent a test event: the receiver took it.",
                f"was sent a test event at {subscription.url}: the receiver took it (2xx).",
            )
        return self._back(subscription)

    def replay_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        subscription = self._acted_on(request, object_id)
        if request.method != "POST":
            return self._back(subscription)
        replay = dead_letters_replay(subscription=subscription)
        if replay.events == 0:
            self.message_user(request, "No dead letters wait for a replay.", messages.INFO)
        elif replay.error:
            self.message_user(
                request,
                f"Replay failed: the receiver did not take the {replay.events} dead "
                f"letter(s) ({replay.error}). They stay here for another replay.",
                messages.ERROR,
            )
        else:
            self.log_change(request, subscription, f"Replayed {replay.events} dead letter(s).")
            self.message_user(
                request,
                f"Replayed {replay.events} dead letter(s): the receiver took them.",
                messages.SUCCESS,
            )
        return self._back(subscription)


def _when(moment: datetime) -> str:
    return date_format(timezone.localtime(moment), "DATETIME_FORMAT")


def _paused_by(request: HttpRequest) -> str:
    username = request.user.get_username() if request.user.is_authenticated else ""
    return f"paused by {username}" if username else "paused by hand"
