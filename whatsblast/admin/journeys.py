"""Journeys in the admin: the list, the builder, recurring campaigns, a journey's page.

Pages (under ``/admin/journeys/journey/``):

- the list: name, status, how people enter in words, number, version, how many entered,
  are in it now and left, and a recurring campaign's next run; filtered by status,
  searched by name; "New journey" and "New recurring campaign";
- ``add/`` and ``<id>/edit/``: the builder (``journeys_builder``), or for a recurring
  campaign ``add-recurring/`` and its ``<id>/edit/`` (``journeys_recurring``); ``check/``
  (POST, JSON) checks a definition while it is built;
- ``<id>/change/``: the journey's page (``journeys_page``): status with Go live, Pause,
  Resume and Archive (``<id>/go-live/`` … POST), versions, figures and steps, test
  contacts (``<id>/test-contacts/`` POST: add, remove, enter now, skip the wait), a
  recurring campaign's next and past runs, and the dry run's form, whose answer is
  ``<id>/dry-run/``.

Views parse, check permissions and call the services (``journeys.versions``,
``journeys.reports``, ``journeys.dry_run``, ``journeys.recurring``). Reading needs the view
permission; building ``add``/``change``; test contacts ``change``; going live, pausing,
resuming and archiving ``journeys.run_journey``. People in journeys (``JourneyInstance``)
have a read-only list of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from operator import or_
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.http.response import HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from campaigns.models import Campaign, Contact, PhoneNumber, Segment
from journeys.definition import (
    Definition,
    DefinitionError,
    ScheduleEntry,
    SegmentEntry,
    definition_parse,
)
from journeys.dry_run import (
    TestContactError,
    instance_wait_skip,
    journey_dry_run,
    journey_test_contact_add,
    journey_test_contact_remove,
    journey_test_enter,
)
from journeys.models import (
    HistoryKind,
    Journey,
    JourneyHistory,
    JourneyInstance,
    JourneyStatus,
    JourneyVersion,
)
from journeys.recurring import next_run_times
from journeys.reports import journey_figures
from journeys.versions import (
    JourneyStateError,
    journey_archive,
    journey_go_live,
    journey_pause,
    journey_resume,
)
from webhooks.customers import customer_find
from whatsblast.admin.customer_links import customer_link
from whatsblast.admin.journeys_builder import (
    JourneyForm,
    NewVersion,
    builder_options,
    check_answer,
    current_definition,
    current_parsed,
    definition_text,
    journey_save,
)
from whatsblast.admin.journeys_page import (
    EXAMPLE_PROPERTIES_HELP,
    SAMPLE_FIRST,
    SAMPLE_LIST,
    SAMPLE_TEST,
    SAMPLE_UPCOMING,
    dry_rows,
    dry_run_options,
    dry_run_sample,
    figures_context,
    is_recurring,
    properties_parse,
    test_contact_rows,
    versions,
)
from whatsblast.admin.journeys_recurring import (
    RecurringForm,
    initial_of,
    recurring_save,
    runs_context,
)
from whatsblast.admin.journeys_text import entry_text, repeated_campaign
from whatsblast.auth.time_zone import zone_choices

RUN_PERMISSION = "journeys.run_journey"
INSTANCES_PERMISSION = "journeys.view_journeyinstance"
STATUS_ACTIONS = ("go-live", "pause", "resume", "archive")


def can_run(request: HttpRequest) -> bool:
    return bool(request.user.has_perm(RUN_PERMISSION))


# --- the list ---------------------------------------------------------------------------------


class JourneysChangeList(ChangeList):
    """Each row of the page carries its definition's entry in words and its people (one
    query for the page's definitions, one for its counts, one each for the names of the
    segments and campaigns the entries name), whatever the page's length."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        rows: list[Journey] = list(self.result_list)
        for journey, summary in zip(rows, journey_summaries(rows), strict=True):
            journey.summary = summary  # type: ignore[attr-defined]
        self.result_list = rows


def journey_summaries(journeys: list[Journey]) -> list[dict[str, Any]]:
    if not journeys:
        return []
    match = reduce(or_, (Q(journey_id=j.pk, number=j.version) for j in journeys))
    definitions: dict[int, Definition | None] = {}
    for journey_id, data in JourneyVersion.objects.filter(match).values_list(
        "journey_id", "definition"
    ):
        try:
            definitions[journey_id] = definition_parse(data)
        except DefinitionError:
            definitions[journey_id] = None
    counts = {
        row["journey_id"]: row
        for row in JourneyInstance.objects.filter(
            journey_id__in=[j.pk for j in journeys], test=False
        )
        .values("journey_id")
        .annotate(
            entered=Count("id"),
            active=Count("id", filter=Q(state="active")),
            left=Count("id", filter=Q(state="exited")),
        )
        .order_by()
    }
    entries = [d.entry for d in definitions.values() if d is not None]
    segment_ids = [e.segment_id for e in entries if isinstance(e, SegmentEntry)]
    campaign_ids = [e.campaign_id for e in entries if isinstance(e, ScheduleEntry)]
    segments = dict(Segment.objects.filter(pk__in=segment_ids).values_list("pk", "name"))
    campaigns = dict(Campaign.objects.filter(pk__in=campaign_ids).values_list("pk", "name"))
    now = timezone.now()
    summaries = []
    for journey in journeys:
        definition = definitions.get(journey.pk)
        summary: dict[str, Any] = {"definition": definition, "counts": counts.get(journey.pk, {})}
        if definition is None:
            summary.update(entry="(its definition cannot be read)", recurring=False)
        else:
            entry = definition.entry
            summary["entry"] = entry_text(entry, segments=segments)
            summary["repeats"] = repeated_campaign(entry, campaigns)
            summary["recurring"] = isinstance(entry, ScheduleEntry)
            if isinstance(entry, ScheduleEntry) and journey.status == JourneyStatus.LIVE:
                upcoming = next_run_times(entry, now=now, count=1)
                summary["next_run"] = upcoming[0] if upcoming else None
        summaries.append(summary)
    return summaries


class StatusFilter(admin.SimpleListFilter):
    """Archived journeys are left out unless asked for."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*JourneyStatus.choices, ("all", "All, archived too")]

    def choices(self, changelist: Any) -> Any:
        for choice in super().choices(changelist):
            if choice["display"] == "All":
                choice["display"] = "Not archived"
            yield choice

    def queryset(self, request: HttpRequest, queryset: QuerySet[Journey]) -> QuerySet[Journey]:
        value = self.value()
        if value == "all":
            return queryset
        if value in JourneyStatus.values:
            return queryset.filter(status=value)
        return queryset.exclude(status=JourneyStatus.ARCHIVED)


@admin.register(Journey)
class JourneyAdmin(admin.ModelAdmin[Journey]):
    list_display = (
        "journey",
        "status_badge",
        "entry",
        "version_shown",
        "entered",
        "in_it_now",
        "left",
        "next_run",
    )
    list_display_links = ("journey",)
    list_filter = (StatusFilter, "phone_number")
    search_fields = ("name",)
    search_help_text = "Part of a journey's name."
    list_select_related = ("phone_number",)
    ordering = ("name",)
    change_list_template = "admin/journeys/journey/change_list.html"

    class Media:
        css = {"all": ("whatsblast/campaign.css", "whatsblast/journey_builder.css")}

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return JourneysChangeList

    def has_delete_permission(self, request: HttpRequest, obj: Journey | None = None) -> bool:
        return False  # a journey is archived: its people, runs and history stay readable

    def has_change_permission(self, request: HttpRequest, obj: Journey | None = None) -> bool:
        if obj is not None and obj.status == JourneyStatus.ARCHIVED:
            return False
        return super().has_change_permission(request, obj)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return super().changelist_view(
            request,
            {
                **(extra_context or {}),
                "title": "Journeys",
                "recurring_add_url": reverse("admin:journeys_journey_add_recurring"),
            },
        )

    # --- the list's columns ------------------------------------------------------------------

    @staticmethod
    def _summary(obj: Journey) -> dict[str, Any]:
        return getattr(obj, "summary", {})

    def _count(self, obj: Journey, key: str) -> str:
        summary = self._summary(obj)
        if summary.get("recurring"):
            return "—"
        return f"{summary.get('counts', {}).get(key, 0):,}"

    @admin.display(description="journey", ordering="name")
    def journey(self, obj: Journey) -> str:
        """Its name, and the number it sends from under it (the list fits 1366 px)."""
        return format_html(
            '<span title="{}">{}</span><br><span class="wb-share">from {}</span>',
            obj.description[:200],
            obj.name,
            obj.phone_number.display_phone_number,
        )

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Journey) -> str:
        return format_html(
            '<span class="wb-badge wb-status-{}">{}</span>', obj.status, obj.get_status_display()
        )

    @admin.display(description="entry")
    def entry(self, obj: Journey) -> str:
        summary = self._summary(obj)
        if summary.get("repeats"):
            return format_html(
                '{}<br><span class="wb-share">repeats {}</span>',
                summary.get("entry", ""),
                summary["repeats"],
            )
        return str(summary.get("entry", ""))

    @admin.display(description="version", ordering="version")
    def version_shown(self, obj: Journey) -> str:
        return f"v{obj.version}"

    @admin.display(description="entered")
    def entered(self, obj: Journey) -> str:
        return self._count(obj, "entered")

    @admin.display(description="in it now")
    def in_it_now(self, obj: Journey) -> str:
        return self._count(obj, "active")

    @admin.display(description="left")
    def left(self, obj: Journey) -> str:
        return self._count(obj, "left")

    @admin.display(description="next run")
    def next_run(self, obj: Journey) -> str:
        summary = self._summary(obj)
        if not summary.get("recurring"):
            return ""
        upcoming = summary.get("next_run")
        if upcoming is not None:
            return date_format(timezone.localtime(upcoming), "SHORT_DATETIME_FORMAT")
        if obj.status == JourneyStatus.PAUSED:
            return "paused"
        if obj.status == JourneyStatus.DRAFT:
            return "once live"
        return "—"

    # --- routing -----------------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        def view(func: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
            return self.admin_site.admin_view(func)

        name = "journeys_journey"
        own = [
            path("add-recurring/", view(self.add_recurring_view), name=f"{name}_add_recurring"),
            path("check/", view(self.check_view), name=f"{name}_check"),
            path("<int:object_id>/edit/", view(self.edit_view), name=f"{name}_edit"),
            path("<int:object_id>/dry-run/", view(self.dry_run_view), name=f"{name}_dry_run"),
            path(
                "<int:object_id>/test-contacts/",
                view(self.test_contacts_view),
                name=f"{name}_test_contacts",
            ),
        ]
        for action in STATUS_ACTIONS:
            own.append(
                path(
                    f"<int:object_id>/{action}/",
                    view(self.status_view),
                    {"action": action},
                    name=f"{name}_{action.replace('-', '_')}",
                )
            )
        return own + super().get_urls()

    def _journey(self, request: HttpRequest, object_id: int | str) -> Journey:
        journey = (
            Journey.objects.select_related("phone_number__account", "created_by")
            .filter(pk=int(object_id))
            .first()
        )
        if journey is None:
            raise Http404("no such journey")
        if not self.has_view_permission(request, journey):
            raise PermissionDenied
        return journey

    @staticmethod
    def _page_url(journey: Journey) -> str:
        return reverse("admin:journeys_journey_change", args=[journey.pk])

    def _context(self, request: HttpRequest, **values: Any) -> dict[str, Any]:
        return {**self.admin_site.each_context(request), "opts": self.opts, **values}

    # --- the builder -------------------------------------------------------------------------

    def add_view(
        self,
        request: HttpRequest,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        return self._builder(request, None)

    def edit_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        journey = self._journey(request, object_id)
        if not self.has_change_permission(request, journey):
            raise PermissionDenied
        if is_recurring(current_parsed(journey)):
            return self._recurring(request, journey)
        return self._builder(request, journey)

    def _builder(self, request: HttpRequest, journey: Journey | None) -> HttpResponse:
        new_version: NewVersion | None = None
        problems: dict[str, str] = {}
        if request.method == "POST":
            form = JourneyForm(request.POST, journey=journey)
            before = journey.version if journey is not None else 0
            outcome = journey_save(request, form, confirmed=request.POST.get("confirmed") == "yes")
            problems, new_version = outcome.problems, outcome.new_version
            if outcome.journey is not None and new_version is None:
                saved = outcome.journey
                if journey is None:
                    self.log_addition(request, saved, "created in the builder")
                    text = f"Journey “{saved}” saved as a draft: go live from its page."
                elif outcome.version is not None and outcome.version.number != before:
                    text = f"Journey “{saved}” saved as version {outcome.version.number}."
                else:
                    text = f"Journey “{saved}” saved."
                if journey is not None:
                    self.log_change(request, saved, text)
                self.message_user(request, text, messages.SUCCESS)
                return HttpResponseRedirect(self._page_url(saved))
        elif journey is not None:
            form = JourneyForm(
                journey=journey,
                initial={
                    "name": journey.name,
                    "phone_number": journey.phone_number_id,
                    "description": journey.description,
                    "definition": current_definition(journey),
                },
            )
        else:
            numbers = list(PhoneNumber.objects.values_list("pk", flat=True)[:2])
            form = JourneyForm(
                initial={
                    "definition": _blank_definition(),
                    # The only number there is, chosen already.
                    "phone_number": numbers[0] if len(numbers) == 1 else None,
                }
            )
        account = journey.phone_number.account_id if journey is not None else None
        title = f"Edit journey {journey}" if journey is not None else "New journey"
        context = self._context(
            request,
            title=title,
            form=form,
            journey=journey,
            problems=problems,
            problem_rows=sorted(problems.items(), key=lambda item: _path_order(item[0])),
            new_version=new_version,
            has_been_live=journey is not None and journey.live_since is not None,
            builder_options=builder_options(account_id=account),
            check_url=reverse("admin:journeys_journey_check"),
            page_url=self._page_url(journey) if journey is not None else "",
            media=self.media + form.media,
        )
        return TemplateResponse(request, "admin/journeys/journey/builder.html", context)

    def check_view(self, request: HttpRequest) -> HttpResponse:
        """``POST definition=<JSON>&phone_number=<id>`` (or ``journey=<id>``): the steps in
        words, or every problem by path (400)."""
        if not (self.has_add_permission(request) or self.has_change_permission(request)):
            return JsonResponse({"error": "You may not build journeys."}, status=403)
        if request.method != "POST":
            return JsonResponse({"error": "Send the definition by POST."}, status=405)
        number: PhoneNumber | None = None
        journey_id = request.POST.get("journey", "")
        if journey_id.isdigit():
            number = self._journey(request, journey_id).phone_number
        else:
            number_id = request.POST.get("phone_number", "")
            if number_id.isdigit():
                number = PhoneNumber.objects.filter(pk=int(number_id)).first()
        answer, status = check_answer(number, request.POST.get("definition", ""))
        return JsonResponse(answer, status=status)

    # --- recurring campaigns -----------------------------------------------------------------

    def add_recurring_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        return self._recurring(request, None)

    def _recurring(self, request: HttpRequest, journey: Journey | None) -> HttpResponse:
        if request.method == "POST":
            form = RecurringForm(request.POST, journey=journey)
            saved = recurring_save(request, form)
            if saved is not None:
                if journey is None:
                    self.log_addition(request, saved, "recurring campaign created")
                    text = f"Recurring campaign “{saved}” saved as a draft: go live from its page."
                else:
                    text = f"Recurring campaign “{saved}” saved."
                    self.log_change(request, saved, text)
                self.message_user(request, text, messages.SUCCESS)
                return HttpResponseRedirect(self._page_url(saved))
        elif journey is not None:
            form = RecurringForm(journey=journey, initial=initial_of(journey))
        else:
            form = RecurringForm(initial={"zone": timezone.get_current_timezone_name()})
        context = self._context(
            request,
            title=f"Edit recurring campaign {journey}" if journey else "New recurring campaign",
            form=form,
            journey=journey,
            zones=zone_choices(),
            page_url=self._page_url(journey) if journey is not None else "",
            media=self.media + form.media,
        )
        return TemplateResponse(request, "admin/journeys/journey/recurring_form.html", context)

    # --- the journey's page ------------------------------------------------------------------

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if not object_id.isdigit():
            raise Http404("no such journey")
        journey = self._journey(request, object_id)
        definition = current_parsed(journey)
        user = request.user
        instances_url = (
            reverse("admin:journeys_journeyinstance_changelist")
            if user.has_perm(INSTANCES_PERMISSION)
            else ""
        )
        context = self._context(
            request,
            title=str(journey),
            journey=journey,
            definition=definition,
            definition_json=definition_text(current_definition(journey)),
            entry=_entry_words(definition),
            versions=versions(journey),
            can_run=can_run(request),
            can_change=self.has_change_permission(request, journey),
            may_see_campaigns=user.has_perm("campaigns.view_campaign"),
            status_urls={
                action.replace("-", "_"): reverse(
                    f"admin:journeys_journey_{action.replace('-', '_')}", args=[journey.pk]
                )
                for action in STATUS_ACTIONS
            },
            edit_url=reverse("admin:journeys_journey_edit", args=[journey.pk]),
            recurring=is_recurring(definition),
        )
        if context["recurring"]:
            assert isinstance(definition.entry, ScheduleEntry)
            context.update(runs_context(journey, definition.entry))
        else:
            figures = journey_figures(journey)
            context.update(
                figures_context(journey, definition, figures, instances_url=instances_url)
            )
            context.update(
                test_contacts=test_contact_rows(journey),
                test_contacts_url=reverse(
                    "admin:journeys_journey_test_contacts", args=[journey.pk]
                ),
                dry_run_url=reverse("admin:journeys_journey_dry_run", args=[journey.pk]),
                dry_run=dry_run_options(journey, definition),
                properties_help=EXAMPLE_PROPERTIES_HELP,
                instances_url=instances_url,
            )
        return TemplateResponse(request, "admin/journeys/journey/page.html", context)

    # --- status ------------------------------------------------------------------------------

    def status_view(self, request: HttpRequest, object_id: int, action: str) -> HttpResponse:
        return require_POST(self._status)(request, object_id, action)

    def _status(self, request: HttpRequest, object_id: int, action: str) -> HttpResponse:
        if not can_run(request):
            raise PermissionDenied
        journey = self._journey(request, object_id)
        who = request.user.get_username()
        try:
            if action == "go-live":
                journey_go_live(journey=journey)
                text = f"{journey} is live: people enter and its steps fire from now."
            elif action == "pause":
                journey_pause(journey=journey, reason=f"paused by {who}")
                text = f"{journey} is paused: nobody enters and no step fires until it resumes."
            elif action == "resume":
                journey_resume(journey=journey)
                text = f"{journey} resumed: steps that came due meanwhile fire now."
            else:
                left = journey_archive(journey=journey)
                text = f"{journey} archived: {left:,} people left it."
        except DefinitionError as exc:
            problems = "; ".join(f"{at}: {what}" for at, what in exc.problems.items())
            self.message_user(request, f"{journey} cannot go live: {problems}", messages.ERROR)
        except (JourneyStateError, ValueError) as exc:
            self.message_user(request, str(exc), messages.ERROR)
        else:
            self.log_change(request, journey, text)
            self.message_user(request, text, messages.SUCCESS)
        return HttpResponseRedirect(self._page_url(journey))

    # --- test contacts -----------------------------------------------------------------------

    def test_contacts_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return require_POST(self._test_contacts)(request, object_id)

    def _test_contacts(self, request: HttpRequest, object_id: int) -> HttpResponse:
        journey = self._journey(request, object_id)
        if not self.has_change_permission(request, journey):
            raise PermissionDenied
        action = request.POST.get("action", "")
        try:
            text = self._test_action(journey, action, request)
        except (TestContactError, ValueError) as exc:
            self.message_user(request, f"{str(exc)[:1].upper()}{str(exc)[1:]}.", messages.ERROR)
        else:
            self.log_change(request, journey, text)
            self.message_user(request, text, messages.SUCCESS)
        return HttpResponseRedirect(f"{self._page_url(journey)}#journey-test-contacts")

    @staticmethod
    def _test_action(journey: Journey, action: str, request: HttpRequest) -> str:
        if action == "add":
            phone = request.POST.get("phone", "").strip()
            customer = customer_find(phone) if phone else None
            if customer is None or customer.contact is None:
                raise ValueError(f"no contact has the number {phone!r}")
            journey_test_contact_add(journey=journey, contact=customer.contact)
            return f"{customer.contact.recipient} is a test contact of {journey}."
        contact = _test_contact(journey, request.POST.get("contact", ""))
        if action == "remove":
            journey_test_contact_remove(journey=journey, contact=contact)
            return f"{contact.recipient} is no longer a test contact of {journey}."
        if action == "enter":
            properties = properties_parse(request.POST.get("properties", ""))
            entered = journey_test_enter(journey=journey, contact=contact, properties=properties)
            return f"{contact.recipient} entered {journey} at {entered.step}."
        if action == "skip":
            instance = JourneyInstance.objects.filter(
                pk=_int(request.POST.get("instance")) or 0, journey=journey, contact=contact
            ).first()
            if instance is None:
                raise ValueError("that person is not in the journey now")
            if not instance_wait_skip(instance=instance):
                raise ValueError(f"{contact.recipient} is not waiting at a step now")
            return (
                f"{contact.recipient}'s wait at {instance.step} ends now: the next pass moves "
                "them on."
            )
        raise ValueError(f"unknown action {action!r}")

    # --- dry runs ----------------------------------------------------------------------------

    def dry_run_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        journey = self._journey(request, object_id)
        definition = current_parsed(journey)
        if is_recurring(definition):
            return HttpResponseRedirect(self._page_url(journey))
        sample = request.GET.get("sample", SAMPLE_TEST)
        if sample not in (SAMPLE_TEST, SAMPLE_LIST, SAMPLE_FIRST, SAMPLE_UPCOMING):
            sample = SAMPLE_TEST
        raw = request.GET.get("properties", "")
        error = ""
        people = []
        contacts, who = dry_run_sample(journey, definition, sample, _int(request.GET.get("list")))
        try:
            properties = properties_parse(raw)
        except ValueError as exc:
            error, properties = str(exc), {}
        if not error:
            if contacts or sample == SAMPLE_UPCOMING:
                people = journey_dry_run(journey, contacts=contacts, properties=properties)
            else:
                error = f"nobody to walk through it: {who} are none"
        context = self._context(
            request,
            title=f"Dry run: {journey}",
            journey=journey,
            page_url=self._page_url(journey),
            people=dry_rows(people),
            who=who,
            error=error,
            sample=sample,
            chosen_list=_int(request.GET.get("list")),
            properties=raw,
            dry_run=dry_run_options(journey, definition),
            dry_run_url=reverse("admin:journeys_journey_dry_run", args=[journey.pk]),
            properties_help=EXAMPLE_PROPERTIES_HELP,
            viewer_zone=timezone.get_current_timezone_name(),
        )
        return TemplateResponse(request, "admin/journeys/journey/dry_run.html", context)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _test_contact(journey: Journey, raw: str) -> Contact:
    contact = journey.test_contacts.filter(pk=_int(raw) or 0).first()
    if contact is None:
        raise TestContactError("that contact is not one of this journey's test contacts")
    return contact


def _entry_words(definition: Definition) -> str:
    entry = definition.entry
    segments: dict[int, str] = {}
    if isinstance(entry, SegmentEntry):
        segments = dict(Segment.objects.filter(pk=entry.segment_id).values_list("pk", "name"))
    return entry_text(entry, segments=segments)


def _path_order(path: str) -> tuple[int, str]:
    """Problems in the page's order: the form's fields, the entry, the settings, the steps."""
    head = path.split(".")[0].split("[")[0]
    order = {"name": 0, "phone_number": 1, "definition": 2, "entry": 3, "steps": 9}
    return order.get(head, 5), path


def _blank_definition() -> dict[str, Any]:
    """A new journey's starting point: an event entry and one step to fill in."""
    return {
        "entry": {"type": "event", "event": ""},
        "steps": [{"id": "wait", "type": "wait", "delay": {"hours": 1}}],
    }


# --- people in journeys -------------------------------------------------------------------------


class StepFilter(admin.SimpleListFilter):
    """``?step=ID``: people at that step (the journey page's "waiting" links)."""

    title = "step"
    parameter_name = "step"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value()
        return [(value, value)] if value else []

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[JourneyInstance]
    ) -> QuerySet[JourneyInstance]:
        value = self.value()
        return queryset.filter(step=value) if value else queryset


@admin.register(JourneyInstance)
class JourneyInstanceAdmin(admin.ModelAdmin[JourneyInstance]):
    """Who is in which journey and where: read-only, as the journeys move them."""

    list_display = ("person", "journey_link", "where", "entered_at", "next_at", "test")
    list_filter = ("state", ("journey", admin.RelatedOnlyFieldListFilter), StepFilter, "test")
    search_fields = ("contact__phone", "contact__user_id", "contact__name", "key")
    search_help_text = "A phone, user id or name, or an instance key such as a cart id."
    list_select_related = ("contact", "journey")
    ordering = ("-entered_at", "-id")
    readonly_fields = (
        "person",
        "journey_link",
        "version",
        "key",
        "where",
        "next_at",
        "entered_at",
        "exited_at",
        "properties",
        "holdout",
        "test",
        "history_table",
    )
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[JourneyInstance], search_term: str
    ) -> tuple[QuerySet[JourneyInstance], bool]:
        """A number as people type it ("(11) 98765-4321") finds the person by phone."""
        found = customer_find(search_term) if search_term.strip() else None
        if found is not None and found.contact is not None:
            return queryset.filter(contact=found.contact), False
        return super().get_search_results(request, queryset, search_term)

    @admin.display(description="person")
    def person(self, obj: JourneyInstance) -> str:
        contact = obj.contact
        label = f"{contact.name} ({contact.recipient})" if contact.name else contact.recipient
        return customer_link(contact.recipient, label)

    @admin.display(description="journey", ordering="journey__name")
    def journey_link(self, obj: JourneyInstance) -> str:
        url = reverse("admin:journeys_journey_change", args=[obj.journey_id])
        return format_html('<a href="{}">{}</a>', url, obj.journey.name)

    @admin.display(description="where")
    def where(self, obj: JourneyInstance) -> str:
        if obj.state == "active":
            return f"at {obj.step}"
        return f"left: {obj.exit_reason or obj.get_exit_kind_display()}"

    @admin.display(description="next step fires", ordering="due_at")
    def next_at(self, obj: JourneyInstance) -> str:
        if obj.state != "active" or obj.due_at is None:
            return "—"
        return date_format(timezone.localtime(obj.due_at), "SHORT_DATETIME_FORMAT")

    @admin.display(description="what happened")
    def history_table(self, obj: JourneyInstance) -> str:
        rows = JourneyHistory.objects.filter(instance=obj).order_by("id")[:200]
        return format_html(
            '<table class="wb-table">{}</table>',
            format_html_join(
                "",
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                (
                    (
                        date_format(timezone.localtime(h.at), "SHORT_DATETIME_FORMAT"),
                        HistoryKind(h.kind).label,
                        h.step,
                        h.detail,
                    )
                    for h in rows
                ),
            ),
        )
