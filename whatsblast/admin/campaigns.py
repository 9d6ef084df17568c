"""The campaign admin: create with a live preview, pre-flight, launch, and the live page.

Registered by importing this module from ``campaigns.admin``. Pages:

- ``add/`` and a draft's ``<id>/change/``: the campaign form; each template parameter is
  mapped to a contact field, a constant or the recipient's tracked link, and ``preview/``
  (JSON) renders the message for a few contacts of the chosen lists after every change;
  its tracked link, holdout and A/B test (the variants: ``campaign_variants``);
- ``<id>/preflight/``: the pre-flight report and, for people allowed to launch, launch
  now or schedule;
- the list: the action "Launch the selected drafts together" (one job, one commit: they
  start sending at the same moment);
- a launched (or launching) campaign's ``<id>/change/``: the live page, polling
  ``<id>/live.json``, with pause, resume, cancel, retry failed and ``<id>/export.csv``;
- ``<id>/report/``: the report, its engagement and A/B test (``campaign_engagement``), and
  ``<id>/ab-winner/`` (POST): the marketer's pick of the variant sent to the rest.

A journey's send steps each send through a campaign of their own (kind ``journey_step``):
the list leaves them out unless its "Journey steps" filter asks, and their page names the
journey and step and offers no launch, pause, resume, cancel or retry of its own (the
journey does that). A recurring campaign's runs (kind ``recurring_run``) name it, on the
list and on their page (``journeys_links``).

Views parse, check permissions and call the services; no rule lives here. Launching, every
lifecycle action and picking an A/B winner need ``campaigns.launch_campaign``; the live
data, the report and the export need the view permission.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    JsonResponse,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_GET, require_POST

from campaigns.catalogue.params import mapping_has_click
from campaigns.catalogue.preview import (
    FIELD_SAMPLE,
    SAMPLE_CONTACTS,
    contact_fields,
    message_preview,
    sample_contacts,
)
from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.drafts import campaign_variants_set, param_mapping_check_draft
from campaigns.models import (
    Campaign,
    CampaignKind,
    CampaignStatus,
    Contact,
    ContactList,
    Template,
)
from campaigns.state import LifecycleError, campaign_pause
from campaigns.windows.zones import zone_valid
from delivery.campaigns.ab_launch import variants_errors
from delivery.campaigns.ab_tests import AbTestError, ab_winner_pick
from delivery.campaigns.audience import audience_sample_ids
from delivery.campaigns.exports import campaign_results_csv, campaign_results_filename
from delivery.campaigns.follow_ups import (
    FollowUpError,
    campaign_follow_up,
    campaign_follow_ups,
    follow_up_counts,
)
from delivery.campaigns.guard import GUARD_SETTINGS, guard_settings_update
from delivery.campaigns.launch import LaunchError
from delivery.campaigns.launch_queue import (
    campaign_launch,
    campaign_resume_or_launch,
    campaigns_launch_together,
    launch_queued,
)
from delivery.campaigns.lifecycle import campaign_cancel
from delivery.campaigns.preflight import PreflightReport, campaign_preflight
from delivery.campaigns.pricing import (
    CHARGED_LABEL,
    NO_RATE_CARD,
    amount_text,
    campaign_costs,
    campaigns_costs_known,
    cost_total,
    rate_card_currency,
)
from delivery.campaigns.progress import (
    campaign_by_language,
    campaign_failures,
    campaign_routes,
    campaign_skips,
)
from delivery.campaigns.retry import campaign_retry_failed
from webhooks.inbound import QuickReplyOptOut, quick_reply_opt_outs
from whatsblast.admin.campaign_engagement import engagement_context
from whatsblast.admin.campaign_live import POLL_SECONDS, campaign_live, campaign_live_forget
from whatsblast.admin.campaign_replies import campaign_replies_context
from whatsblast.admin.campaign_variants import (
    AccountTaggedSelect,
    TemplateChoiceField,
    VariantRows,
    approved_templates,
)
from whatsblast.admin.journeys_links import campaign_origin, campaign_origins, is_journey_step
from whatsblast.admin.tables import mapping_table
from whatsblast.core.frequency import frequency_cap_parse
from whatsblast.core.link_destinations import link_destination_errors
from whatsblast.figures import (
    FIGURE_ORDER,
    campaigns_figures,
    duration_text,
    export_extra_columns,
    figure_rows,
    percent_of,
)

LAUNCH_PERMISSION = "campaigns.launch_campaign"


def can_launch(request: HttpRequest) -> bool:
    return bool(request.user.has_perm(LAUNCH_PERMISSION))


# The draft form's thresholds (the guard itself is switched off or on from the live page).
DRAFT_GUARD_SETTINGS = tuple(name for name in GUARD_SETTINGS if name != "guard_enabled")
# Engagement settings a form left empty take the model's default (as the guard's do).
ENGAGEMENT_DEFAULTED = (
    "holdout_percent",
    "attribution_days",
    "ab_test_percent",
    "ab_metric",
    "ab_decide_after_hours",
    "ab_decide_min_sample",
)


class CampaignForm(forms.ModelForm[Campaign]):
    canary_max_failure_percent = forms.FloatField(
        label="Canary: failures allowed (%)",
        min_value=0,
        max_value=100,
        initial=5,
        help_text="The rest is sent only if at most this share of the canary failed.",
    )

    class Meta:
        model = Campaign
        fields = (
            "name",
            "phone_number",
            "pool_numbers",
            "share_weight",
            "template",
            "languages",
            "language_field",
            "language_fallback",
            "lists",
            "segments",
            "exclude_lists",
            "exclude_segments",
            "param_mapping",
            "window_start",
            "window_end",
            "time_zone",
            "time_zone_attribute",
            "frequency_cap",
            "frequency_cap_defer",
            "max_attempts",
            "ambiguous_policy",
            "canary_size",
            *DRAFT_GUARD_SETTINGS,
            "link_destination",
            "link_utm",
            "holdout_percent",
            "attribution_days",
            "ab_test_percent",
            "ab_metric",
            "ab_decide_after_hours",
            "ab_decide_min_sample",
            "ab_auto_winner",
        )
        field_classes = {"template": TemplateChoiceField}
        widgets = {
            "phone_number": AccountTaggedSelect,
            "template": AccountTaggedSelect,
            "lists": forms.SelectMultiple(attrs={"size": 6}),
            "segments": forms.SelectMultiple(attrs={"size": 4}),
            "exclude_lists": forms.SelectMultiple(attrs={"size": 4}),
            "exclude_segments": forms.SelectMultiple(attrs={"size": 4}),
            "pool_numbers": forms.SelectMultiple(attrs={"size": 4}),
            "param_mapping": forms.HiddenInput,
            "window_start": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
            "window_end": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
            "link_destination": forms.URLInput(
                attrs={"size": 60, "placeholder": "https://shop.example.com/sale?city={{city}}"}
            ),
            "holdout_percent": forms.NumberInput(attrs={"step": "any", "min": 0, "max": 50}),
            "ab_test_percent": forms.NumberInput(attrs={"step": "any", "min": 0, "max": 100}),
        }
        labels = {
            "canary_size": "Canary: recipients first",
            "phone_number": "Send from",
            "pool_numbers": "Also send from",
            "share_weight": "Share of the number",
            "lists": "Contact lists",
            "segments": "Segments",
            "exclude_lists": "Leave out lists",
            "exclude_segments": "Leave out segments",
            "frequency_cap": "Frequency cap",
            "frequency_cap_defer": "Send capped recipients later",
            "languages": "Send each recipient their language",
            "language_field": "Contact field with the language",
            "language_fallback": "Fallback language",
            "window_start": "Send between",
            "window_end": "and",
            "time_zone": "Default time zone",
            "time_zone_attribute": "Contact field with a time zone",
            "max_attempts": "Tries per recipient",
            "ambiguous_policy": "If a send's outcome is unknown",
            "link_destination": "Tracked link goes to",
            "link_utm": "Add UTM parameters",
            "holdout_percent": "Hold out (%)",
            "attribution_days": "Count conversions for (days)",
            "ab_test_percent": "Test on (%) of the audience",
            "ab_metric": "The winner has the best",
            "ab_decide_after_hours": "Decide after (hours)",
            "ab_decide_min_sample": "And at least (sends per variant)",
            "ab_auto_winner": "Send the winner to the rest automatically",
        }
        help_texts = {
            "lists": "Everyone on these lists or in the segments below is addressed once.",
            "segments": "Saved rules over contacts (Segments), read when the campaign launches.",
            "exclude_lists": "Nobody on these lists is sent (suppression lists are always "
            "left out).",
            "exclude_segments": "Nobody in these segments is sent, e.g. those messaged this week.",
            "frequency_cap_defer": "Instead of skipping a recipient who reached the cap, send "
            "when the cap allows (inside the send window).",
            "languages": "Every approved language of this template's name is sent: each "
            "recipient gets theirs (the field below, else their number's country).",
            "language_field": "Such as language or locale, holding pt_BR, pt-BR or pt.",
            "language_fallback": "For recipients with no approved language, e.g. en_US; "
            "blank skips them.",
            "pool_numbers": "More numbers of the same WhatsApp account share the sending; "
            "each recipient always hears from one number.",
            "share_weight": "When other campaigns send from the same number at the same "
            "time, a campaign with 2 gets twice the pace of one with 1.",
            "window_start": "Messages go out only between these hours, in each recipient's "
            "own time (blank: any time).",
            "time_zone": "For recipients whose phone number does not tell their zone "
            "(countries with several). Type a city such as America/Sao_Paulo; blank: UTC.",
            "time_zone_attribute": "A column of your contact file holding each person's "
            "zone (such as Europe/Lisbon), used before the number's.",
            "max_attempts": "How often a temporary error (Meta busy, network) is retried "
            "before the message goes to the dead letters for support.",
            "ambiguous_policy": "Rarely, a send times out after leaving: we cannot know if "
            "Meta got it. Resend risks a duplicate message; Mark failed risks a recipient "
            "getting none.",
            "link_destination": "Where a tracked link sends people; {{city}} puts in the "
            "contact's field. Map a body parameter or a URL button to “Tracked link” to send "
            "each recipient their own link.",
            "link_utm": "utm_source=whatsapp, utm_medium=message, utm_campaign (this "
            "campaign) and utm_content (the A/B variant), unless the link sets them.",
            "holdout_percent": "This share of the audience is deliberately not sent, to "
            "measure what the campaign changed (lift). 0 to 50; 0: no holdout.",
            "attribution_days": "A conversion counts for this campaign when it comes within "
            "this many days of the message (1 to 90).",
            "ab_test_percent": "This share of the audience is split evenly between the "
            "variants below; the rest waits for the winner. 0: no A/B test; 100: no rest.",
            "ab_decide_after_hours": "Hours after the launch before a winner is decided.",
            "ab_decide_min_sample": "Sends each variant needs before a winner is decided.",
            "ab_auto_winner": "Off: you pick the winner on the campaign's report.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        template_field = self.fields["template"]
        template_field.queryset = approved_templates()  # type: ignore[attr-defined]
        template_field.help_text = "Only APPROVED templates can be sent."
        self.fields["lists"].queryset = ContactList.objects.order_by("name")  # type: ignore[attr-defined]
        self.fields["exclude_lists"].queryset = ContactList.objects.filter(  # type: ignore[attr-defined]
            suppression=False
        ).order_by("name")
        site_cap = frequency_cap_parse(settings.MARKETING_FREQUENCY_CAP)
        self.fields["frequency_cap"].help_text = (
            'At most N marketing messages per person in D days across all campaigns, as "1/7d";'
            f' "off" for none; blank: the site\'s ({site_cap or "no cap"}).'
        )
        self.fields["param_mapping"].required = False
        for name in (*DRAFT_GUARD_SETTINGS, *ENGAGEMENT_DEFAULTED):  # empty: the default
            self.fields[name].required = False
        self.variants = VariantRows(self.data if self.is_bound else None, self.instance)
        self.variants_ok = True
        self.fields[
            "canary_size"
        ].help_text = (
            "Send to this many first, hold the rest, and continue only if few failed. 0: no canary."
        )
        if self.instance.pk:
            self.initial["canary_max_failure_percent"] = round(
                self.instance.canary_max_failure_rate * 100, 2
            )

    def clean_time_zone(self) -> str:
        value = str(self.cleaned_data.get("time_zone") or "").strip()
        if not value:
            return ""
        zone = zone_valid(value)
        if zone is None:
            raise ValidationError(f"Unknown time zone {value!r}: use an IANA name such as UTC.")
        return zone

    def clean_link_destination(self) -> str:
        value = str(self.cleaned_data.get("link_destination") or "").strip()
        if value:
            errors = link_destination_errors(value)
            if errors:
                raise ValidationError(errors)
        return value

    def clean_frequency_cap(self) -> str:
        value = str(self.cleaned_data.get("frequency_cap") or "").strip().lower()
        try:
            frequency_cap_parse(value)
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc
        return value

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if "lists" in cleaned and "segments" in cleaned:
            if not cleaned["lists"] and not cleaned["segments"]:
                self.add_error("lists", "Choose at least one contact list or segment.")
        defaults = {f.name: f for f in Campaign._meta.fields}
        for name in (*DRAFT_GUARD_SETTINGS, *ENGAGEMENT_DEFAULTED):
            if cleaned.get(name) in (None, ""):
                cleaned[name] = defaults[name].get_default()
        template, number = cleaned.get("template"), cleaned.get("phone_number")
        if template is not None and number is not None and template.account_id != number.account_id:
            self.add_error("template", "The template belongs to another WABA than the number.")
        pool = [n for n in cleaned.get("pool_numbers") or () if number is None or n != number]
        if number is not None and any(n.account_id != number.account_id for n in pool):
            self.add_error(
                "pool_numbers",
                "A pool sends one account's templates: choose numbers of the same account.",
            )
        mapping = cleaned.get("param_mapping") or {}
        self.still_to_map = ""
        if template is not None:
            try:
                self.still_to_map = param_mapping_check_draft(
                    template=template, param_mapping=mapping
                )
            except ValidationError as exc:
                self.add_error(None, exc)
        if (cleaned.get("window_start") is None) != (cleaned.get("window_end") is None):
            self.add_error("window_end", "A send window needs both its start and its end.")
        percent = cleaned.get("canary_max_failure_percent")
        if percent is not None:
            self.instance.canary_max_failure_rate = percent / 100
        self._variants_clean(cleaned)
        self._tracked_link_clean(cleaned, mapping)
        return cleaned

    def _variants_clean(self, cleaned: dict[str, Any]) -> None:
        """The A/B test's rows, read only when there is a test: each row's own errors show
        on the row; the test as a whole is checked once the campaign is built
        (``full_clean``)."""
        self.variants_ok = True
        if not cleaned.get("ab_test_percent"):
            return
        self.variants_ok = self.variants.is_valid()
        number = cleaned.get("phone_number")
        if number is not None and self.variants_ok:
            self.variants.account_check(number.account_id)
            self.variants_ok = not any(row.errors for row in self.variants.forms)
        if not self.variants_ok:
            self.add_error("ab_test_percent", "A variant below needs correcting.")

    def _tracked_link_clean(self, cleaned: dict[str, Any], mapping: Any) -> None:
        """A tracked link mapped without a destination: saved, but still to do."""
        if cleaned.get("link_destination") or self.has_error("link_destination"):
            return
        mappings = [mapping] + [m for _, m in self.variants_to_save(cleaned)]
        if any(isinstance(m, dict) and _has_click(m) for m in mappings):
            todo = "say where the tracked link goes (Tracked link goes to)"
            self.still_to_map = f"{self.still_to_map}; {todo}" if self.still_to_map else todo

    def full_clean(self) -> None:
        """Then the A/B test as a whole, as the launch will check it, on the campaign as
        the form built it (its number, its canary, its languages)."""
        super().full_clean()
        if not self.is_bound or not hasattr(self, "cleaned_data"):
            return
        if not self.cleaned_data.get("ab_test_percent") or not self.variants_ok:
            return
        if self.instance.phone_number_id is None:
            return  # the number's own error says what to do
        for error in variants_errors(self.instance, self.variants.chosen()):
            self.add_error("ab_test_percent", error[:1].upper() + error[1:] + ".")

    def variants_to_save(
        self, cleaned: dict[str, Any] | None = None
    ) -> list[tuple[Template, dict[str, Any]]]:
        """The variants the draft keeps: the rows chosen, or none without an A/B test."""
        cleaned = self.cleaned_data if cleaned is None else cleaned
        if not cleaned.get("ab_test_percent") or not self.variants_ok:
            return []
        return self.variants.chosen()


class GuardForm(forms.ModelForm[Campaign]):
    """The quality guard's thresholds, changed on a launched campaign's page."""

    class Meta:
        model = Campaign
        fields = GUARD_SETTINGS


class CampaignAdminForm(forms.ModelForm[Campaign]):
    """The stock form, for the read-only details under a launched campaign's live page."""

    class Meta:
        model = Campaign
        fields = (
            "name",
            "phone_number",
            "template",
            "languages",
            "language_fallback",
            "lists",
            "segments",
            "exclude_lists",
            "exclude_segments",
            "frequency_cap",
            "frequency_cap_defer",
            "follow_up_of",
            "scheduled_at",
            "max_attempts",
            "ambiguous_policy",
            "link_destination",
            "link_utm",
            "holdout_percent",
            "attribution_days",
            "ab_test_percent",
            "ab_metric",
            "ab_decide_after_hours",
            "ab_decide_min_sample",
            "ab_auto_winner",
        )


class CampaignKindFilter(admin.SimpleListFilter):
    """Journeys' step campaigns are left out unless asked for: the journey's page is theirs."""

    title = "kind"
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            (CampaignKind.CAMPAIGN, "Campaigns"),
            (CampaignKind.RECURRING_RUN, "Recurring runs"),
            (CampaignKind.JOURNEY_STEP, "Journey steps"),
            ("all", "Everything"),
        ]

    def choices(self, changelist: Any) -> Any:
        for choice in super().choices(changelist):
            if choice["display"] == "All":
                choice["display"] = "Campaigns and recurring runs"
            yield choice

    def queryset(self, request: HttpRequest, queryset: QuerySet[Campaign]) -> QuerySet[Campaign]:
        value = self.value()
        if value == "all":
            return queryset
        if value in CampaignKind.values:
            return queryset.filter(kind=value)
        return queryset.exclude(kind=CampaignKind.JOURNEY_STEP)


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin[Campaign]):
    form = CampaignAdminForm
    # Fits 1366 px: the figures a marketer compares campaigns by, in the words of every page.
    list_display = (
        "campaign",
        "status_badge",
        *FIGURE_ORDER[: FIGURE_ORDER.index("replies") + 1],  # audience … replies
        "cost",
    )
    list_display_links = ("campaign",)
    list_filter = (CampaignKindFilter, "status", "phone_number")
    search_fields = ("name",)
    list_select_related = ("phone_number", "template")
    ordering = ("-created_at",)
    filter_horizontal = ("lists",)

    class Media:
        css = {"all": ("whatsblast/campaign.css",)}

    actions = ("launch_together",)

    readonly_fields = (
        "status",
        "status_reason",
        "canary_size",
        "canary_state",
        "started_at",
        "completed_at",
        "created_at",
        "updated_at",
        "progress",
        "parameters",
        "ab_variants",
    )

    def has_launch_permission(self, request: HttpRequest) -> bool:
        return can_launch(request)

    @admin.action(description="Launch the selected drafts together", permissions=("launch",))
    def launch_together(
        self, request: HttpRequest, queryset: QuerySet[Campaign]
    ) -> HttpResponse | None:
        """First a confirmation page with each draft's pre-flight; only its confirm button
        (``confirm=yes``, the same selection) launches, and only when none is blocked."""
        campaigns = list(queryset.select_related("template", "phone_number").order_by("pk"))
        checks = [together_check(campaign) for campaign in campaigns]
        if request.POST.get("confirm") != "yes":
            context = {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": "Launch these drafts together?",
                "checks": checks,
                "blocked": [c for c in checks if c.blocked],
                "enough": len(checks) >= 2,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                "changelist_url": reverse("admin:campaigns_campaign_changelist"),
            }
            return TemplateResponse(
                request, "admin/campaigns/campaign/launch_together.html", context
            )
        blocked = [c for c in checks if c.blocked]
        if blocked:
            names = ", ".join(str(c.campaign) for c in blocked)
            self.message_user(
                request, f"Not launched: blocked at the pre-flight: {names}.", messages.ERROR
            )
            return None
        try:
            count = campaigns_launch_together(
                campaigns=campaigns, actor=request.user.get_username()
            )
        except LaunchError as exc:
            self.message_user(request, f"Not launched: {exc}", messages.ERROR)
            return None
        for campaign in campaigns:
            self.log_change(request, campaign, f"Launch: queued together with {count - 1} more")
            campaign_live_forget(campaign_id=campaign.pk)
        self.message_user(
            request,
            f"{count} campaigns are launching together: they start sending at the same moment.",
            messages.SUCCESS,
        )
        return None

    @admin.display(description="parameters")
    def parameters(self, obj: Campaign) -> str:
        return mapping_table(obj.param_mapping or {})

    @admin.display(description="A/B variants")
    def ab_variants(self, obj: Campaign) -> str:
        if not obj.pk or not obj.ab_test_percent:
            return "No A/B test."
        variants = obj.variants.select_related("template").order_by("position")
        return format_html_join(" · ", "{}: {}", ((v.label, v.template) for v in variants))

    @admin.display(description="progress")
    def progress(self, obj: Campaign) -> str:
        if not obj.pk:
            return "-"
        figures = campaigns_figures(campaign_ids=[obj.pk])[obj.pk]
        return format_html_join(
            " · ", "{} {}", ((f.label, f"{f.count:,}") for f in figure_rows(figures))
        )

    # --- the list's columns: figures for the page's campaigns in two grouped queries ------

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return FiguresChangeList

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return super().changelist_view(request, {**(extra_context or {}), "title": "Campaigns"})

    @staticmethod
    def _figure(obj: Campaign, key: str) -> str:
        figures: dict[str, int] = getattr(obj, "figures", {})
        return f"{figures.get(key, 0):,}"

    @staticmethod
    def _share(obj: Campaign, key: str, base: str) -> str:
        figures: dict[str, int] = getattr(obj, "figures", {})
        count, whole = figures.get(key, 0), figures.get(base, 0)
        if not whole:
            return format_html("{}", f"{count:,}")
        return format_html(
            '{}<br><span class="wb-share">{} %</span>',
            f"{count:,}",
            percent_of(count, whole, digits=0),
        )

    @admin.display(description="campaign", ordering="name")
    def campaign(self, obj: Campaign) -> str:
        when = obj.started_at or obj.scheduled_at or obj.created_at
        verb = "started" if obj.started_at else "scheduled for" if obj.scheduled_at else "created"
        shown = format_html(
            '{}<br><span class="wb-share">{} {}</span>',
            obj.name,
            verb,
            date_format(timezone.localtime(when), "SHORT_DATETIME_FORMAT") if when else "-",
        )
        origin = getattr(obj, "origin", None)
        if origin is None:
            return shown
        what = f"step {origin.step} of" if origin.is_step else "a run of"
        return format_html(
            '{}<br><span class="wb-share wb-origin">{} <a href="{}">{}</a></span>',
            shown,
            what,
            origin.url,
            origin.journey,
        )

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Campaign) -> str:
        status = str(obj.status)
        label = str(CampaignStatus(status).label)
        if launch_queued(obj):
            status, label = "launching", "Launching"
        return format_html('<span class="wb-badge wb-status-{}">{}</span>', status, label)

    @admin.display(description="audience")
    def audience(self, obj: Campaign) -> str:
        return self._figure(obj, "audience")

    @admin.display(description="sent")
    def sent(self, obj: Campaign) -> str:
        return self._share(obj, "sent", "audience")

    @admin.display(description="delivered")
    def delivered(self, obj: Campaign) -> str:
        return self._share(obj, "delivered", "sent")

    @admin.display(description="read")
    def read(self, obj: Campaign) -> str:
        return self._share(obj, "read", "delivered")

    @admin.display(description="failed")
    def failed(self, obj: Campaign) -> str:
        return self._share(obj, "failed", "audience")

    @admin.display(description="replies")
    def replies(self, obj: Campaign) -> str:
        return self._figure(obj, "replies")

    @admin.display(description="cost")
    def cost(self, obj: Campaign) -> str:
        """The campaign's last reckoned cost (the tick once a minute, the live page and the
        report reckon it), read from Redis for the whole page at once, never from the
        messages; under it the link to the report of a finished campaign (one column less:
        the list fits 1366 px)."""
        known = getattr(obj, "cost_known", None)
        if known is not None and known.card_currency:
            # The figure, its currency below it (as the counts have their shares): narrow.
            cost = format_html(
                '<span class="wb-cost" title="{}">{}</span><br><span class="wb-share">{}</span>',
                known.text,
                amount_text(known.cost),
                known.currency or known.card_currency,
            )
        elif not getattr(obj, "rate_card_currency", ""):
            cost = format_html('<span class="wb-share">{}</span>', NO_RATE_CARD)
        else:
            cost = format_html(
                '<span class="wb-share" title="{}">-</span>',
                "Not reckoned yet: within a minute, or at once on the campaign or its report.",
            )
        report = self.report_link(obj)
        return format_html("{}<br>{}", cost, report) if report else cost

    @admin.display(description="")
    def report_link(self, obj: Campaign) -> str:
        if obj.status not in (CampaignStatus.COMPLETED, CampaignStatus.CANCELLED):
            return ""
        url = reverse("admin:campaigns_campaign_report", args=[obj.pk])
        return format_html('<a href="{}" class="wb-report-link">Report</a>', url)

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        # A launched campaign owns up to millions of messages: the default page would load
        # them all to list them. Campaigns with messages are cancelled, not deleted.
        ids = [c.pk for c in objs]
        launched: QuerySet[Campaign] = Campaign.objects.filter(
            pk__in=ids, messages__isnull=False
        ).distinct()
        if launched.exists():
            protected = [f"{c} has messages: cancel it instead" for c in launched]
            return [], {}, set(), protected
        return super().get_deleted_objects(objs, request)

    def has_change_permission(self, request: HttpRequest, obj: Campaign | None = None) -> bool:
        # Once launched (or on its way), its messages are rendered from these settings:
        # editing them would make the record lie. Lifecycle changes go through the services.
        if obj is not None and (
            obj.status not in (CampaignStatus.DRAFT, CampaignStatus.SCHEDULED) or launch_queued(obj)
        ):
            return False
        return super().has_change_permission(request, obj)

    # --- routing ---------------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        def view(func: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
            return self.admin_site.admin_view(func)

        name = "campaigns_campaign"
        own = [
            path("preview/", view(self.preview_view), name=f"{name}_preview"),
            path("<int:object_id>/preflight/", view(self.preflight_view), name=f"{name}_preflight"),
            path("<int:object_id>/launch/", view(self.launch_view), name=f"{name}_launch"),
            path("<int:object_id>/live.json", view(self.live_view), name=f"{name}_live"),
            path("<int:object_id>/export.csv", view(self.export_view), name=f"{name}_export"),
            path("<int:object_id>/report/", view(self.report_view), name=f"{name}_report"),
            path("<int:object_id>/replies/", view(self.replies_view), name=f"{name}_replies"),
            path("<int:object_id>/guard/", view(self.guard_view), name=f"{name}_guard"),
            path("<int:object_id>/ab-winner/", view(self.ab_winner_view), name=f"{name}_ab_winner"),
            path(
                "<int:object_id>/follow-up/",
                view(self.follow_up_view),
                name=f"{name}_follow_up",
            ),
        ]
        for action in ("pause", "resume", "cancel", "retry-failed"):
            own.append(
                path(
                    f"<int:object_id>/{action}/",
                    view(self.action_view),
                    {"action": action},
                    name=f"{name}_{action.replace('-', '_')}",
                )
            )
        return own + super().get_urls()

    def add_view(
        self,
        request: HttpRequest,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        return self._form_view(request, None)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        campaign = self.get_object(request, object_id)
        if campaign is not None and campaign.status == CampaignStatus.DRAFT:
            if not launch_queued(campaign) and self.has_change_permission(request, campaign):
                return self._form_view(request, campaign)
        if campaign is not None and self.has_view_permission(request, campaign):
            extra_context = {
                **(extra_context or {}),
                **self._live_context(request, campaign),
                "title": str(campaign),
                "journey_origin": campaign_origin(campaign),
            }
        return super().change_view(request, object_id, form_url, extra_context)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Campaign | None = None,
    ) -> HttpResponse:
        response = super().render_change_form(request, context, add, change, form_url, obj)
        if context.get("journey_origin") is not None and isinstance(response, TemplateResponse):
            # The journey's step or recurring campaign it belongs to, named above the page.
            response.template_name = "admin/journeys/campaign_change_form.html"
        return response

    def _campaign(self, request: HttpRequest, object_id: int) -> Campaign:
        campaign: Campaign | None = self.get_object(request, str(object_id))
        if campaign is None:
            raise Http404("no such campaign")
        if not self.has_view_permission(request, campaign):
            raise PermissionDenied
        return campaign

    def _change_url(self, campaign: Campaign) -> str:
        return reverse("admin:campaigns_campaign_change", args=[campaign.pk])

    # --- create and edit -------------------------------------------------------------------

    def _form_view(self, request: HttpRequest, campaign: Campaign | None) -> HttpResponse:
        form = CampaignForm(request.POST or None, instance=campaign)
        if request.method == "POST" and form.is_valid():
            with transaction.atomic():
                saved = form.save(commit=False)
                saved.status_reason = ""  # a refused launch's reason no longer applies
                saved.save()
                form.save_m2m()
                campaign_variants_set(campaign=saved, variants=form.variants_to_save())
            if "_preflight" in request.POST:
                return redirect("admin:campaigns_campaign_preflight", object_id=saved.pk)
            if form.still_to_map:
                self.message_user(
                    request,
                    f"Draft {saved} saved; still to do before it can launch: {form.still_to_map}.",
                    messages.WARNING,
                )
                return redirect(self._change_url(saved))
            self.message_user(request, f"Draft {saved} saved.", messages.SUCCESS)
            return redirect(self._change_url(saved))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Edit draft {campaign}" if campaign else "New campaign",
            "form": form,
            "campaign": campaign,
            "preview_url": reverse("admin:campaigns_campaign_preview"),
            "media": self.media + form.media,
            "guard_fields": DRAFT_GUARD_SETTINGS,
            "variant_rows": form.variants.rows(),
        }
        return TemplateResponse(request, "admin/campaigns/campaign/campaign_form.html", context)

    @staticmethod
    def _mapping_from(raw: str) -> Any:
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {}

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        """The template's parameters, the mappable fields and the message for a few
        contacts: ``?template=ID&lists=ID&segments=ID&mapping=JSON``."""
        if not (self.has_add_permission(request) or self.has_change_permission(request)):
            raise PermissionDenied
        template_id = _int(request.GET.get("template"))
        template = Template.objects.filter(pk=template_id).first() if template_id else None
        list_ids = [i for i in map(_int, request.GET.getlist("lists")) if i is not None]
        segment_ids = [i for i in map(_int, request.GET.getlist("segments")) if i is not None]
        fields = contact_fields(list_ids=list_ids)
        contacts = sample_contacts(list_ids=list_ids)
        if segment_ids:
            # Segments are read now, as the launch will read them.
            found = audience_sample_ids(
                list_ids=list_ids, segment_ids=segment_ids, limit=FIELD_SAMPLE
            )
            sampled = list(Contact.objects.filter(pk__in=found).order_by("pk"))
            contacts = sampled[:SAMPLE_CONTACTS]
            keys = {k for c in sampled if isinstance(c.attributes, dict) for k in c.attributes}
            fields = [*fields[:2], *sorted(keys | set(fields[2:]))]
        if template is None:
            return JsonResponse({"slots": [], "fields": fields, "samples": [], "error": None})
        preview = message_preview(
            template=template,
            mapping=self._mapping_from(request.GET.get("mapping", "")),
            contacts=contacts,
        )
        mapping = self._mapping_from(request.GET.get("mapping", ""))
        taps = quick_replies(template, mapping if isinstance(mapping, dict) else {})
        return JsonResponse(
            {
                **preview,
                "fields": fields,
                "template": _template_info(template),
                "quick_replies": [tap.as_dict() for tap in taps],
            }
        )

    # --- pre-flight and launch -------------------------------------------------------------

    def preflight_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        campaign = self._campaign(request, object_id)
        if campaign.status != CampaignStatus.DRAFT or launch_queued(campaign):
            return redirect(self._change_url(campaign))
        report = campaign_preflight(campaign=campaign)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Pre-flight check: {campaign}",
            "campaign": campaign,
            "report": report,
            "can_launch": can_launch(request),
            "zone": campaign.time_zone or "UTC",
            "edit_url": self._change_url(campaign),
            "quick_replies": quick_replies(campaign.template, campaign.param_mapping or {}),
        }
        return TemplateResponse(request, "admin/campaigns/campaign/preflight.html", context)

    @staticmethod
    def _schedule_at(request: HttpRequest, campaign: Campaign) -> datetime | None:
        if request.POST.get("when") != "schedule":
            return None
        raw = request.POST.get("at", "")
        try:
            naive = datetime.fromisoformat(raw)
        except ValueError:
            raise ValidationError(f"{raw!r} is not a date and time") from None
        return naive.replace(tzinfo=ZoneInfo(campaign.time_zone or "UTC"))

    def launch_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return require_POST(self._launch)(request, object_id)

    def _launch(self, request: HttpRequest, object_id: int) -> HttpResponse:
        if not can_launch(request):
            raise PermissionDenied
        campaign = self._campaign(request, object_id)
        if is_journey_step(campaign):
            return self._journey_step_refused(request, campaign)
        try:
            at = self._schedule_at(request, campaign)
            outcome = campaign_launch(campaign=campaign, at=at, actor=request.user.get_username())
        except (LaunchError, ValidationError) as exc:
            text = exc.messages[0] if isinstance(exc, ValidationError) else str(exc)
            self.message_user(request, f"Not launched: {text}", messages.ERROR)
            return redirect("admin:campaigns_campaign_preflight", object_id=campaign.pk)
        if outcome == "scheduled":
            self.message_user(request, f"{campaign} is scheduled for {at:%Y-%m-%d %H:%M %Z}.")
        else:
            self.message_user(request, f"{campaign} is launching.", messages.SUCCESS)
        self.log_change(request, campaign, f"Launch: {outcome}")
        campaign_live_forget(campaign_id=campaign.pk)
        return redirect(self._change_url(campaign))

    # --- the live page ---------------------------------------------------------------------

    def _live_context(self, request: HttpRequest, campaign: Campaign) -> dict[str, Any]:
        pk = campaign.pk
        return {
            "live": campaign_live(campaign=campaign),
            "live_url": reverse("admin:campaigns_campaign_live", args=[pk]),
            "export_url": reverse("admin:campaigns_campaign_export", args=[pk]),
            "report_url": reverse("admin:campaigns_campaign_report", args=[pk]),
            "messages_url": reverse("admin:delivery_message_changelist"),
            "dead_url": reverse("admin:delivery_deadletter_changelist")
            if request.user.has_perm("delivery.view_deadletter")
            else "",
            "viewer_time_zone": timezone.get_current_timezone_name(),
            "poll_ms": POLL_SECONDS * 1000,
            # A journey's step is started, paused and stopped by its journey only.
            "can_launch": can_launch(request) and not is_journey_step(campaign),
            "action_urls": {
                action: reverse(f"admin:campaigns_campaign_{action}", args=[pk])
                for action in ("pause", "resume", "cancel", "retry_failed")
            },
            "guard_form": GuardForm(instance=campaign),
            "guard_url": reverse("admin:campaigns_campaign_guard", args=[pk]),
            "replies_url": reverse("admin:campaigns_campaign_replies", args=[pk]),
        }

    def guard_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return require_POST(self._guard)(request, object_id)

    def _guard(self, request: HttpRequest, object_id: int) -> HttpResponse:
        if not can_launch(request):
            raise PermissionDenied
        campaign = self._campaign(request, object_id)
        form = GuardForm(request.POST, instance=Campaign.objects.get(pk=campaign.pk))
        if not form.is_valid():
            errors = "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in form.errors.items())
            self.message_user(request, f"Thresholds not saved: {errors}", messages.ERROR)
        else:
            values = {name: form.cleaned_data[name] for name in GUARD_SETTINGS}
            try:
                guard_settings_update(campaign=campaign, values=values)
            except (ValueError, ValidationError) as exc:
                self.message_user(request, f"Thresholds not saved: {exc}", messages.ERROR)
            else:
                self.log_change(request, campaign, "quality guard thresholds changed")
                self.message_user(request, "Quality guard thresholds saved.", messages.SUCCESS)
        campaign_live_forget(campaign_id=campaign.pk)
        return HttpResponseRedirect(self._change_url(campaign))

    def live_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return require_GET(self._live)(request, object_id)

    def _live(self, request: HttpRequest, object_id: int) -> HttpResponse:
        campaign = self._campaign(request, object_id)
        return JsonResponse(campaign_live(campaign=campaign))

    def action_view(self, request: HttpRequest, object_id: int, action: str) -> HttpResponse:
        return require_POST(self._action)(request, object_id, action)

    def _action(self, request: HttpRequest, object_id: int, action: str) -> HttpResponse:
        if not can_launch(request):
            raise PermissionDenied
        campaign = self._campaign(request, object_id)
        if is_journey_step(campaign):
            return self._journey_step_refused(request, campaign)
        who = request.user.get_username()
        try:
            text = self._act(campaign, action, who)
        except (LifecycleError, LaunchError) as exc:
            self.message_user(request, str(exc), messages.ERROR)
        else:
            self.log_change(request, campaign, text)
            self.message_user(request, text, messages.SUCCESS)
        campaign_live_forget(campaign_id=campaign.pk)
        return HttpResponseRedirect(self._change_url(campaign))

    def _journey_step_refused(self, request: HttpRequest, campaign: Campaign) -> HttpResponse:
        origin = campaign_origin(campaign)
        where = f" “{origin.journey}”" if origin is not None else ""
        self.message_user(
            request,
            f"{campaign} is a journey's step: the journey{where} starts, pauses and stops it, "
            "from its own page.",
            messages.ERROR,
        )
        return HttpResponseRedirect(self._change_url(campaign))

    @staticmethod
    def _act(campaign: Campaign, action: str, who: str) -> str:
        if action == "pause":
            campaign_pause(campaign=campaign, reason=f"paused by {who}")
            return f"{campaign} paused."
        if action == "resume":
            if campaign_resume_or_launch(campaign=campaign, actor=who) == "queued":
                return f"{campaign} is launching."
            return f"{campaign} resumed."
        if action == "cancel":
            cancelled = campaign_cancel(campaign=campaign, reason=f"cancelled by {who}")
            return f"{campaign} cancelled: {cancelled:,} unsent message(s) cancelled."
        report = campaign_retry_failed(campaign=campaign, actor=who)
        return f"{campaign}: {report.retried:,} failed message(s) queued for a fresh attempt."

    def export_view(self, request: HttpRequest, object_id: int) -> StreamingHttpResponse:
        campaign = self._campaign(request, object_id)
        response = StreamingHttpResponse(
            campaign_results_csv(campaign=campaign, extra=export_extra_columns()),
            content_type="text/csv; charset=utf-8",
        )
        filename = campaign_results_filename(campaign)
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response

    # --- the replies -----------------------------------------------------------------------

    def replies_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """What recipients wrote back to the campaign, newest first, a page at a time: for
        whoever may see the campaign (the Inbound pages stay Support's)."""
        campaign = self._campaign(request, object_id)
        context = {
            **self.admin_site.each_context(request),
            **campaign_replies_context(campaign=campaign, page=request.GET.get("page")),
            "opts": self.opts,
            "title": f"Replies: {campaign}",
            "campaign": campaign,
            "change_url": self._change_url(campaign),
            "may_see_contacts": request.user.has_perm("campaigns.view_contact"),
            "may_see_messages": request.user.has_perm("delivery.view_message"),
        }
        return TemplateResponse(request, "admin/campaigns/campaign/replies.html", context)

    # --- follow-ups ----------------------------------------------------------------------

    def follow_up_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return require_POST(self._follow_up)(request, object_id)

    def _follow_up(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """A draft to the contacts of this campaign with the posted ``outcome``."""
        campaign = self._campaign(request, object_id)
        if not self.has_add_permission(request):
            raise PermissionDenied
        try:
            draft = campaign_follow_up(campaign=campaign, key=request.POST.get("outcome", ""))
        except FollowUpError as exc:
            self.message_user(request, f"No follow-up: {exc}.", messages.ERROR)
            return redirect("admin:campaigns_campaign_report", object_id=campaign.pk)
        self.message_user(
            request,
            f"Draft {draft} created: its audience is the segment "
            f"“{draft.segments.get()}”, with {campaign}'s exclusions. Choose its template "
            "and check it before launch.",
            messages.SUCCESS,
        )
        return redirect(self._change_url(draft))

    # --- the A/B test's winner ---------------------------------------------------------------

    def ab_winner_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return require_POST(self._ab_winner)(request, object_id)

    def _ab_winner(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """The marketer's pick: the posted ``position``'s variant goes to the rest."""
        if not can_launch(request):
            raise PermissionDenied
        campaign = self._campaign(request, object_id)
        position = _int(request.POST.get("position"))
        try:
            if position is None:
                raise AbTestError("choose a variant")
            ab_winner_pick(campaign=campaign, position=position)
        except AbTestError as exc:
            self.message_user(request, f"No winner sent: {exc}.", messages.ERROR)
        else:
            label = "ABCDE"[position] if 0 <= position < 5 else str(position)
            text = f"Variant {label} is the winner: the rest of {campaign} is sent it."
            self.log_change(request, campaign, text)
            self.message_user(request, text, messages.SUCCESS)
        campaign_live_forget(campaign_id=campaign.pk)
        return redirect("admin:campaigns_campaign_report", object_id=campaign.pk)

    # --- the report ------------------------------------------------------------------------

    def report_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """A finished (or running) campaign on one page: its figures, failures by error with
        links to the recipients and dead letters, replies, billing and its run."""
        campaign = self._campaign(request, object_id)
        figures = campaigns_figures(campaign_ids=[campaign.pk])[campaign.pk]
        messages_url = reverse("admin:delivery_message_changelist")
        dead_url = reverse("admin:delivery_deadletter_changelist")
        may_see_dead = request.user.has_perm("delivery.view_deadletter")
        failures = []
        for group in campaign_failures(campaign=campaign):
            code = "none" if group.code is None else str(group.code)
            query = f"campaign__id__exact={campaign.pk}"
            failures.append(
                {
                    "group": group,
                    "messages_url": f"{messages_url}?{query}&status__exact={group.status}"
                    + ("" if group.code is None else f"&last_error_code={group.code}"),
                    "dead_url": f"{dead_url}?{query}&error_code={code}&status__exact=all"
                    if group.status == "dead" and may_see_dead
                    else "",
                }
            )
        costs = campaign_costs(campaign=campaign)
        duration = None
        finished = campaign.first_completed_at or campaign.completed_at
        if campaign.started_at and finished:
            duration = duration_text(finished - campaign.started_at)
        context = {
            **self.admin_site.each_context(request),
            **engagement_context(
                campaign=campaign, figures=figures, costs=costs, can_pick=can_launch(request)
            ),
            "opts": self.opts,
            "title": f"Report: {campaign}",
            "campaign": campaign,
            "figures": figure_rows(figures, keep_zero=False),
            "failures": failures,
            "costs": costs,
            "cost": cost_total(costs, card_currency=rate_card_currency()),
            "charged_label": CHARGED_LABEL,
            "skips": campaign_skips(campaign=campaign),
            "by_language": campaign_by_language(campaign=campaign),
            "routes": campaign_routes(campaign=campaign),
            "follow_ups": _follow_ups(campaign, request) if campaign.started_at else [],
            "follow_up_url": reverse("admin:campaigns_campaign_follow_up", args=[campaign.pk]),
            "ab_winner_url": reverse("admin:campaigns_campaign_ab_winner", args=[campaign.pk]),
            "duration": duration,
            "messages_url": f"{messages_url}?campaign__id__exact={campaign.pk}",
            "export_url": reverse("admin:campaigns_campaign_export", args=[campaign.pk]),
            "change_url": self._change_url(campaign),
        }
        return TemplateResponse(request, "admin/campaigns/campaign/report.html", context)


class FiguresChangeList(ChangeList):
    """The campaign list: each row of the page carries its figures (two grouped queries
    for the page, whatever its length), its last reckoned cost (one Redis read) and whether
    its launch is queued."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        rows = list(self.result_list)
        figures = campaigns_figures(campaign_ids=[c.pk for c in rows])
        card_currency = rate_card_currency()
        costs = campaigns_costs_known(
            campaign_ids=[c.pk for c in rows], card_currency=card_currency
        )
        origins = campaign_origins(rows)
        for campaign in rows:
            campaign.figures = figures.get(campaign.pk, {})
            campaign.cost_known = costs.get(campaign.pk)
            campaign.rate_card_currency = card_currency
            campaign.origin = origins.get(campaign.pk)
        self.result_list = rows


def _follow_ups(campaign: Campaign, request: HttpRequest) -> list[dict[str, Any]]:
    """The report's follow-up choices with how many each would address now; none for a
    user who may not create campaigns."""
    if not request.user.has_perm("campaigns.add_campaign"):
        return []
    counts = follow_up_counts(campaign=campaign)
    return [
        {"key": f.key, "label": f.label, "contacts": counts[f.key]}
        for f in campaign_follow_ups(campaign)
    ]


def _has_click(mapping: dict[str, Any]) -> bool:
    """Whether a mapping (a draft's may be half done or malformed) holds a tracked link."""
    try:
        return mapping_has_click(mapping)
    except (AttributeError, TypeError):
        return False


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class TogetherCheck:
    """One selected campaign on the launch-together confirmation: its pre-flight, or why
    it is not a draft that can launch."""

    campaign: Campaign
    report: PreflightReport | None
    not_a_draft: str = ""

    @property
    def blocked(self) -> bool:
        return bool(self.not_a_draft) or self.report is None or not self.report.ok

    @property
    def skipped(self) -> list[tuple[str, int]]:
        """(reason, contacts) the launch skips, largest first, over every country."""
        if self.report is None:
            return []
        totals: dict[str, int] = {}
        for line in self.report.countries:
            for reason, count in line.skipped.items():
                totals[reason] = totals.get(reason, 0) + count
        return sorted(totals.items(), key=lambda item: -item[1])


def together_check(campaign: Campaign) -> TogetherCheck:
    if campaign.status != CampaignStatus.DRAFT or launch_queued(campaign):
        status = "launching" if launch_queued(campaign) else campaign.get_status_display()
        return TogetherCheck(campaign, None, f"{status}, not a draft")
    return TogetherCheck(campaign, campaign_preflight(campaign=campaign))


def quick_replies(template: Template, mapping: dict[str, Any]) -> list[QuickReplyOptOut]:
    """Per quick-reply button of the template: does a tap opt the recipient out?"""
    buttons = mapping.get("buttons")
    return quick_reply_opt_outs(
        buttons=template.buttons or [], mapped=buttons if isinstance(buttons, dict) else {}
    )


def _template_info(template: Template) -> dict[str, Any]:
    return {
        "id": template.pk,
        "name": template.name,
        "language": template.language,
        "category": template.category,
        "unusable": template_unusable_reasons(template),
    }
