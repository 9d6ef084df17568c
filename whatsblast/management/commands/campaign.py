"""manage.py campaign create|status ...

Each subcommand is an ``add_<name>_arguments`` / ``handle_<name>`` pair that calls one
service (see ``SubcommandCommand``); a new subcommand is one entry in ``subcommands`` and
those two methods.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from campaigns.drafts import (
    campaign_ab_test_set,
    campaign_create,
    param_mapping_from_specs,
    template_of_number,
)
from campaigns.models import AbMetric, Campaign
from campaigns.state import LifecycleError, campaign_pause
from campaigns.windows.daily import SendWindow
from delivery.campaigns.ab_launch import variants_errors
from delivery.campaigns.ab_tests import AbTestError, ab_summary, ab_winner_pick
from delivery.campaigns.follow_ups import (
    FOLLOW_UPS,
    TAPPED_PREFIX,
    FollowUpError,
    campaign_follow_up,
)
from delivery.campaigns.launch import LaunchError, campaign_start
from delivery.campaigns.lifecycle import campaign_cancel, campaign_resume
from delivery.campaigns.progress import CampaignProgress, campaign_progress, held_for_quality_text
from whatsblast.management.base import SubcommandCommand


class Command(SubcommandCommand):
    help = "Campaigns: create, start, pause, resume, cancel, follow progress."
    subcommands = {
        "create": "Create a draft campaign; prints its id.",
        "start": "Launch a campaign now, or at --at; starting twice is harmless.",
        "pause": "Stop claiming at once; sends in flight finish.",
        "resume": "Continue a paused campaign where it stopped.",
        "cancel": "Cancel a campaign; rows not yet sent become cancelled.",
        "status": "Message counts by status, send rate and ETA of a campaign.",
        "follow-up": "Create a draft to the contacts a campaign reached in a given way.",
        "ab-test": "Set a draft's A/B test: its variants and how the winner is decided.",
        "ab-status": "An A/B test's arms: sent, successes, rate, interval, chance to be best.",
        "ab-pick": "Send variant A-E to the rest of the audience (the marketer's pick).",
    }

    # --- helpers shared by the subcommands -----------------------------------------------------

    @staticmethod
    def add_campaign_id_argument(parser: CommandParser) -> None:
        parser.add_argument("campaign_id", type=int, metavar="ID", help="campaign id")

    @staticmethod
    def campaign_get(options: dict[str, Any]) -> Campaign:
        try:
            return Campaign.objects.get(pk=options["campaign_id"])
        except Campaign.DoesNotExist:
            raise CommandError(f"no campaign with id {options['campaign_id']}") from None

    # --- create ----------------------------------------------------------------------------------

    def add_create_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="campaign name")
        parser.add_argument(
            "--number", required=True, metavar="PNID", help="phone number id to send from"
        )
        parser.add_argument("--template", required=True, metavar="NAME", help="template name")
        parser.add_argument("--language", help="template language, when the name exists in several")
        parser.add_argument(
            "--list",
            dest="lists",
            action="append",
            default=[],
            metavar="NAME",
            help="contact list (repeat for several); at least one list or segment",
        )
        parser.add_argument(
            "--segment",
            dest="segments",
            action="append",
            default=[],
            metavar="NAME",
            help="segment (manage.py segment create; repeat for several)",
        )
        parser.add_argument(
            "--exclude-list",
            dest="exclude_lists",
            action="append",
            default=[],
            metavar="NAME",
            help="leave out everyone on this list (repeat for several)",
        )
        parser.add_argument(
            "--exclude-segment",
            dest="exclude_segments",
            action="append",
            default=[],
            metavar="NAME",
            help="leave out everyone in this segment (repeat for several)",
        )
        parser.add_argument(
            "--frequency-cap",
            default="",
            metavar="N/Dd",
            help="at most N marketing messages per contact in D days (1/3d), or off; "
            "default: MARKETING_FREQUENCY_CAP",
        )
        parser.add_argument(
            "--defer-capped",
            action="store_true",
            help="send a capped recipient once the cap allows instead of skipping them",
        )
        parser.add_argument(
            "--param",
            dest="params",
            action="append",
            default=[],
            metavar="PARAM=SOURCE",
            help="body param from a contact field (1=name, 2=city) or a constant "
            "(2=const:SALE20); every template param must be mapped",
        )
        parser.add_argument(
            "--header",
            metavar="SOURCE",
            help="the header's parameter: a field, or const:https://... (media link), "
            "const:1234 (uploaded media id) or const:TEXT",
        )
        parser.add_argument(
            "--button",
            dest="buttons",
            action="append",
            default=[],
            metavar="INDEX=SOURCE",
            help="a button's parameter by index: a URL suffix (1=const:SUMMER, 1=coupon) "
            "or a quick reply payload",
        )
        parser.add_argument(
            "--mapping",
            metavar="JSON",
            help="the whole parameter mapping as JSON (README: the mapping format), for "
            "carousels, offers, coupons and products; instead of --param/--header/--button",
        )
        parser.add_argument(
            "--languages",
            action="store_true",
            help="send each recipient the approved version of the template in their language",
        )
        parser.add_argument(
            "--language-field",
            default="language",
            metavar="NAME",
            help="contact field holding the language (pt_BR, pt-BR, pt); default language",
        )
        parser.add_argument(
            "--language-fallback",
            default="",
            metavar="CODE",
            help="language for recipients with no approved one (en_US); default: skip them",
        )
        parser.add_argument(
            "--window",
            type=_window,
            metavar="HH:MM-HH:MM",
            help="send only inside this daily window in each recipient's local time, "
            "e.g. 09:00-20:00 (22:00-06:00 wraps midnight)",
        )
        parser.add_argument(
            "--time-zone",
            default="",
            metavar="ZONE",
            help="IANA zone for recipients whose number gives none (default UTC)",
        )
        parser.add_argument(
            "--time-zone-attribute",
            default="timezone",
            metavar="NAME",
            help="contact attribute whose IANA zone overrides the number's (default timezone)",
        )

        parser.add_argument(
            "--link",
            default="",
            metavar="URL",
            help="where a tracked link sends people ({{field}} puts in the contact's); map "
            'a body param or URL button to it with --mapping \'{"buttons": {"0": '
            '{"click": true}}}\'',
        )
        parser.add_argument(
            "--no-utm", action="store_true", help="do not add UTM parameters to the link"
        )
        parser.add_argument(
            "--holdout",
            type=float,
            default=0.0,
            metavar="PERCENT",
            help="share of the audience deliberately not sent, to measure lift (0-50)",
        )
        parser.add_argument(
            "--attribution-days",
            type=int,
            default=7,
            metavar="N",
            help="a conversion counts within N days of the message (1-90, default 7)",
        )

    def handle_create(self, options: dict[str, Any]) -> None:
        campaign = campaign_create(
            name=options["name"],
            phone_number_id=options["number"],
            template_name=options["template"],
            language=options["language"],
            list_names=options["lists"],
            param_mapping=_mapping(options),
            window=options["window"],
            time_zone=options["time_zone"],
            time_zone_attribute=options["time_zone_attribute"],
            segment_names=options["segments"],
            exclude_list_names=options["exclude_lists"],
            exclude_segment_names=options["exclude_segments"],
            frequency_cap=options["frequency_cap"],
            frequency_cap_defer=options["defer_capped"],
            languages=options["languages"],
            language_field=options["language_field"],
            language_fallback=options["language_fallback"],
            link_destination=options["link"],
            link_utm=not options["no_utm"],
            holdout_percent=options["holdout"],
            attribution_days=options["attribution_days"],
        )
        self.stdout.write(str(campaign.pk))

    # --- follow-up ----------------------------------------------------------------------------

    def add_follow_up_arguments(self, parser: CommandParser) -> None:
        self.add_campaign_id_argument(parser)
        parser.add_argument(
            "--with",
            dest="outcome",
            required=True,
            metavar="OUTCOME",
            help="; ".join(f"{f.key}: those who {f.label}" for f in FOLLOW_UPS)
            + f"; {TAPPED_PREFIX}BUTTON: those who tapped that quick reply",
        )

    def handle_follow_up(self, options: dict[str, Any]) -> None:
        try:
            draft = campaign_follow_up(campaign=self.campaign_get(options), key=options["outcome"])
        except FollowUpError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(draft.pk))

    # --- A/B tests -----------------------------------------------------------------------------

    def add_ab_test_arguments(self, parser: CommandParser) -> None:
        self.add_campaign_id_argument(parser)
        parser.add_argument(
            "--variant",
            dest="variants",
            action="append",
            default=[],
            metavar="TEMPLATE[:LANGUAGE]",
            help="a variant's template (repeat, 2 to 5; the first is A)",
        )
        parser.add_argument(
            "--variant-mapping",
            dest="variant_mappings",
            action="append",
            default=[],
            metavar="JSON",
            help="each variant's mapping, in the same order (default: the campaign's)",
        )
        parser.add_argument(
            "--share", type=float, default=20.0, metavar="PERCENT", help="test share (20)"
        )
        parser.add_argument(
            "--metric", default="read", choices=[m.value for m in AbMetric], help="(read)"
        )
        parser.add_argument("--decide-after", type=float, default=4.0, metavar="HOURS")
        parser.add_argument("--min-sample", type=int, default=100, metavar="SENDS")
        parser.add_argument(
            "--manual", action="store_true", help="wait for ab-pick instead of sending the leader"
        )

    def handle_ab_test(self, options: dict[str, Any]) -> None:
        campaign = self.campaign_get(options)
        mappings = [_json_object(m, "--variant-mapping") for m in options["variant_mappings"]]
        if mappings and len(mappings) != len(options["variants"]):
            raise CommandError("give one --variant-mapping per --variant, or none")
        variants = [
            (
                template_of_number(campaign.phone_number, spec),
                mappings[i] if mappings else campaign.param_mapping,
            )
            for i, spec in enumerate(options["variants"])
        ]
        campaign = campaign_ab_test_set(
            campaign=campaign,
            variants=variants,
            share_percent=options["share"] if variants else 0.0,
            metric=options["metric"],
            decide_after_hours=options["decide_after"],
            min_sample=options["min_sample"],
            auto_winner=not options["manual"],
        )
        errors = variants_errors(campaign, variants)
        for error in errors:
            self.stderr.write(f"the launch will refuse: {error}")
        self.stdout.write(
            f"{campaign.pk} A/B test on {campaign.ab_test_percent:g}%, {len(variants)} variants"
        )

    def add_ab_status_arguments(self, parser: CommandParser) -> None:
        self.add_campaign_id_argument(parser)
        parser.add_argument("--json", action="store_true", help="print a JSON object")

    def handle_ab_status(self, options: dict[str, Any]) -> None:
        summary = ab_summary(self.campaign_get(options))
        if summary is None:
            raise CommandError("the campaign runs no A/B test")
        if options["json"]:
            self.stdout.write(json.dumps(summary.as_dict(), indent=2))
            return
        self.stdout.write(f"{summary.state or 'draft'}: winning metric {summary.metric_label}")
        for arm in summary.arms:
            low, high = arm.interval
            self.stdout.write(
                f"{arm.label} {arm.template}: {arm.successes:,} of {arm.sent:,} sent "
                f"({arm.rate:.1%}, 95% {low:.1%} to {high:.1%}), "
                f"best {arm.probability_best:.1%}"
            )
        if summary.decision:
            self.stdout.write(summary.decision)
        if summary.held:
            self.stdout.write(f"{summary.held:,} recipients wait for the winner")

    def add_ab_pick_arguments(self, parser: CommandParser) -> None:
        self.add_campaign_id_argument(parser)
        parser.add_argument("variant", metavar="VARIANT", help="A to E")

    def handle_ab_pick(self, options: dict[str, Any]) -> None:
        label = options["variant"].strip().upper()
        if len(label) != 1 or label not in "ABCDE":
            raise CommandError("the variant is a letter, A to E")
        try:
            ab_winner_pick(campaign=self.campaign_get(options), position="ABCDE".index(label))
        except AbTestError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"variant {label} goes to the rest")

    # --- start / pause / resume / cancel -------------------------------------------------------

    def add_start_arguments(self, parser: CommandParser) -> None:
        self.add_campaign_id_argument(parser)
        parser.add_argument(
            "--at", type=_aware_datetime, help="ISO date-time to launch at (default: now)"
        )

    def handle_start(self, options: dict[str, Any]) -> None:
        try:
            summary = campaign_start(campaign=self.campaign_get(options), at=options["at"])
        except LaunchError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(summary.as_dict()))

    def add_pause_arguments(self, parser: CommandParser) -> None:
        self.add_campaign_id_argument(parser)
        parser.add_argument("--reason", default="paused from the command line")

    def handle_pause(self, options: dict[str, Any]) -> None:
        campaign = self._transition(
            lambda c: campaign_pause(campaign=c, reason=options["reason"]), options
        )
        self.stdout.write(f"{campaign.pk} {campaign.status}")

    def add_resume_arguments(self, parser: CommandParser) -> None:
        self.add_campaign_id_argument(parser)

    def handle_resume(self, options: dict[str, Any]) -> None:
        campaign = self._transition(lambda c: campaign_resume(campaign=c), options)
        self.stdout.write(f"{campaign.pk} {campaign.status}")

    def add_cancel_arguments(self, parser: CommandParser) -> None:
        self.add_campaign_id_argument(parser)

    def handle_cancel(self, options: dict[str, Any]) -> None:
        campaign = self.campaign_get(options)
        cancelled = self._transition(lambda c: campaign_cancel(campaign=c), options)
        self.stdout.write(f"{campaign.pk} cancelled ({cancelled} messages not sent)")

    def _transition(self, action: Any, options: dict[str, Any]) -> Any:
        try:
            return action(self.campaign_get(options))
        except (LifecycleError, LaunchError) as exc:
            raise CommandError(str(exc)) from exc

    # --- status ----------------------------------------------------------------------------------

    def add_status_arguments(self, parser: CommandParser) -> None:
        self.add_campaign_id_argument(parser)
        parser.add_argument("--json", action="store_true", help="print a JSON object")

    def handle_status(self, options: dict[str, Any]) -> None:
        progress = campaign_progress(campaign=self.campaign_get(options))
        if options["json"]:
            self.stdout.write(json.dumps(progress.as_dict(), indent=2))
        else:
            self.stdout.write(progress_text(progress))


def _window(value: str) -> SendWindow:
    try:
        return SendWindow.parse(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _aware_datetime(value: str) -> datetime:
    parsed = parse_datetime(value)
    if parsed is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not an ISO date-time")
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed)
    return parsed


def progress_text(progress: CampaignProgress) -> str:
    counts = "  ".join(f"{status} {n}" for status, n in progress.counts.items() if n)
    if progress.eta_seconds is None:
        eta = "unknown (nothing sent in the last minute)"
    else:
        eta = f"{progress.eta_seconds:.0f}s"
        if progress.eta is not None and progress.remaining:
            eta += f" (around {progress.eta:%Y-%m-%d %H:%M:%S %Z})"
    lines = [
        f"campaign {progress.campaign_id} {progress.name!r}: {progress.status}",
        f"messages {progress.total}, remaining {progress.remaining}",
        f"by status: {counts or 'none yet'}",
        f"rate {progress.rate_per_second} msg/s over the last minute, ETA {eta}",
    ]
    held = held_for_quality_text(progress.held_for_quality_assessment)
    if held:
        lines.append(held)
    return "\n".join(lines)


def _mapping(options: dict[str, Any]) -> dict[str, Any]:
    """The mapping from --mapping JSON, or from --param / --header / --button."""
    if options["mapping"] is None:
        return param_mapping_from_specs(
            options["params"], header=options["header"], buttons=options["buttons"]
        )
    if options["params"] or options["header"] or options["buttons"]:
        raise CommandError("give --mapping or --param/--header/--button, not both")
    return _json_object(options["mapping"], "--mapping")


def _json_object(text: str, option: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{option} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise CommandError(f"{option} must be a JSON object")
    return value
