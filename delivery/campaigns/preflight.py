"""The pre-flight check: what a launch would do, and what would stop or slow it, before it runs.

One report for a draft campaign: the audience after opt-outs, duplicates across lists and
Meta's refusal of marketing templates to US numbers; contacts lacking a mapped field (the
launch refuses them); the portfolio's messaging-limit headroom; and the ETA at the
campaign's share of its number's rate, with send windows when it has them. Errors are what
``delivery.campaigns.launch.campaign_validate`` would refuse; warnings are what would slow or
surprise. Nothing is written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from campaigns.audience.regions import (
    calling_code_region,
    nanp_area_regions,
    region_name,
    user_id_region,
)
from campaigns.catalogue.params import (
    ParamMappingError,
    mapping_has_click,
    mapping_validate,
    required_fields,
)
from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.models import (
    TIER_LIMITS,
    Campaign,
    QualityRating,
    TemplateStatus,
)
from campaigns.windows.campaign import campaign_window
from delivery.campaigns.ab_launch import campaign_variants, variants_errors
from delivery.campaigns.audience import Audience, AudienceError, campaign_audience
from delivery.campaigns.format_checks import format_findings
from delivery.campaigns.languages import NO_LANGUAGE, LanguageError
from delivery.campaigns.pricing import CostEstimate, campaign_cost_estimate
from delivery.campaigns.schedule import campaign_share_rate, campaign_window_eta
from delivery.campaigns.skips import (
    HOLDOUT,
    OPTED_OUT,
    US_NUMBER,
    US_USER_ID,
    USER_ID_REFUSED,
    SkipRules,
    user_id_refusal,
)
from delivery.campaigns.tracked_links import tracked_link_errors
from delivery.engine.frequency_cap import campaign_frequency_cap
from delivery.engine.reach import reach_from_table, reach_key, reach_used
from whatsblast.core.redis import get_redis

ERROR = "error"
WARNING = "warning"
INFO = "info"
# Contacts named per missing field: enough to find the pattern, few enough to read.
MISSING_EXAMPLES = 5


@dataclass(frozen=True)
class Finding:
    level: str  # error (the launch would refuse), warning, info
    text: str


@dataclass(frozen=True)
class MissingField:
    field: str
    contacts: int
    examples: list[str]


@dataclass
class CountryLine:
    """The audience in one country: its contacts, and how many are skipped for each reason."""

    region: str  # ISO 3166 code; '' where the number names no known country
    name: str
    contacts: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def sent(self) -> int:
        return self.contacts - sum(self.skipped.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "name": self.name,
            "contacts": self.contacts,
            "sent": self.sent,
            "skipped": dict(self.skipped),
        }


@dataclass
class PreflightReport:
    campaign_id: int
    checked_at: datetime
    lists: int = 0
    segments: int = 0
    memberships: int = 0  # list entries: a contact in two lists counts twice here
    list_contacts: int = 0  # distinct contacts across the lists
    contacts: int = 0  # distinct contacts across the lists and segments
    opted_out: int = 0
    # Left out by a suppression list, an excluded list or segment: skip reason → contacts.
    left_out: dict[str, int] = field(default_factory=dict)
    # The frequency cap ('' for none) and how many of the sendable audience it would stop
    # if they were sent now (it is applied as each row is sent).
    frequency_cap: str = ""
    capped_now: int = 0
    us_blocked: int = 0  # marketing template to a US user: Meta does not deliver them
    user_id_refused: int = 0  # known only by a user id, for a template Meta refuses them
    holdout: int = 0  # the campaign's holdout: deliberately not sent, to measure lift
    # A campaign in many languages: recipients per language sent, those with none (and no
    # fallback), the fallback, and the versions not sent with why.
    languages: dict[str, int] = field(default_factory=dict)
    no_language: int = 0
    language_fallback: str = ""
    languages_left_out: dict[str, str] = field(default_factory=dict)
    countries: list[CountryLine] = field(default_factory=list)
    user_id_refusal: str = ""  # what of the template Meta refuses for user ids, or ''
    missing: list[MissingField] = field(default_factory=list)
    tier: str = ""
    tier_limit: int | None = None  # None: unlimited
    reach_used: int = 0  # unique users the portfolio reached in the last 24 h
    # Of this audience's contacts: how many any campaign sent to in the last 24 h, and how
    # many of those this portfolio did (already in its reach: no headroom spent on them).
    audience_reached: int = 0
    audience_reached_here: int = 0
    rate_per_second: float = 0.0  # the campaign's share of its number's rate
    eta_seconds: float | None = None
    window: str = ""
    window_finishes_at: datetime | None = None
    cost: CostEstimate | None = None  # at the rate card, every message charged
    findings: list[Finding] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        return self.memberships - self.list_contacts

    @property
    def left_out_total(self) -> int:
        return sum(self.left_out.values())

    @property
    def audience(self) -> int:
        """Messages the launch would make pending (one per sendable distinct contact)."""
        return (
            self.contacts
            - self.opted_out
            - self.left_out_total
            - self.us_blocked
            - self.no_language
            - self.user_id_refused
            - self.holdout
        )

    @property
    def headroom(self) -> int | None:
        if self.tier_limit is None:
            return None
        return max(0, self.tier_limit - self.reach_used)

    @property
    def over_headroom(self) -> int:
        headroom = self.headroom
        new_users = max(0, self.audience - self.audience_reached_here)
        return 0 if headroom is None else max(0, new_users - headroom)

    @property
    def limit_days(self) -> int:
        """Extra days the messaging limit adds: each rolling 24 h admits ``tier_limit``."""
        if not self.over_headroom or not self.tier_limit:
            return 0
        return math.ceil(self.over_headroom / self.tier_limit)

    @property
    def eta(self) -> datetime | None:
        if self.window_finishes_at is not None:
            return self.window_finishes_at
        if self.eta_seconds is None:
            return None
        return self.checked_at + timedelta(seconds=self.eta_seconds)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == WARNING]

    def as_dict(self) -> dict[str, Any]:
        return {
            "campaign_id": self.campaign_id,
            "ok": self.ok,
            "lists": self.lists,
            "segments": self.segments,
            "memberships": self.memberships,
            "list_contacts": self.list_contacts,
            "contacts": self.contacts,
            "duplicates": self.duplicates,
            "opted_out": self.opted_out,
            "left_out": dict(self.left_out),
            "frequency_cap": self.frequency_cap,
            "capped_now": self.capped_now,
            "us_blocked": self.us_blocked,
            "user_id_refused": self.user_id_refused,
            "holdout": self.holdout,
            "languages": dict(self.languages),
            "no_language": self.no_language,
            "language_fallback": self.language_fallback,
            "languages_left_out": dict(self.languages_left_out),
            "countries": [line.as_dict() for line in self.countries],
            "audience": self.audience,
            "missing": [m.__dict__ for m in self.missing],
            "tier": self.tier,
            "tier_limit": self.tier_limit,
            "reach_used": self.reach_used,
            "audience_reached": self.audience_reached,
            "audience_reached_here": self.audience_reached_here,
            "headroom": self.headroom,
            "over_headroom": self.over_headroom,
            "rate_per_second": round(self.rate_per_second, 2),
            "eta_seconds": self.eta_seconds,
            "eta": self.eta.isoformat() if self.eta else None,
            "window": self.window,
            "cost": self.cost.as_dict() if self.cost else None,
            "findings": [f.__dict__ for f in self.findings],
        }


def campaign_preflight(*, campaign: Campaign, now: datetime | None = None) -> PreflightReport:
    """Everything a person should know before launching ``campaign``."""
    now = now or timezone.now()
    report = PreflightReport(campaign_id=campaign.pk, checked_at=now)
    template = campaign.template
    findings = report.findings
    if template.status != TemplateStatus.APPROVED:
        findings.append(
            Finding(ERROR, f"Template {template} is {template.status}: only APPROVED sends.")
        )
    unusable = template_unusable_reasons(template)
    findings.extend(
        Finding(ERROR, f"Template {template} cannot be sent by this version: {reason}.")
        for reason in unusable
    )
    mapping_ok = not unusable and _mapping_check(campaign, findings)
    _engagement_check(campaign, findings)
    audience: Audience | None = None
    try:
        audience = campaign_audience(campaign)
    except AudienceError as exc:
        findings.append(Finding(ERROR, f"The audience cannot be read: {exc}."))
    if audience is not None:
        report.lists, report.segments = len(audience.list_ids), len(audience.segment_names)
        if audience.empty:
            findings.append(Finding(ERROR, "The campaign has no contact list and no segment."))
            audience = None
    skips: SkipRules | None = None
    if audience is not None:
        fields = _fields_to_check(campaign) if mapping_ok else []
        report.user_id_refusal = user_id_refusal(template)
        try:
            skips = SkipRules.for_campaign(campaign, audience)
        except LanguageError as exc:
            findings.append(Finding(ERROR, f"Languages: {exc}."))
            skips = SkipRules.for_template(template, audience)
        _audience_count(report, audience, skips, fields)
        _languages_count(report, audience, skips)
        _frequency_cap_count(campaign, report, audience, skips)
        _audience_findings(report)
    _limit_check(campaign, report)
    if audience is not None:
        _audience_reached(campaign, report, audience, now)
        _limit_finding(report)
    _eta_check(campaign, report, now)
    if audience is not None and skips is not None and mapping_ok:
        finishes_at = now + timedelta(seconds=report.eta_seconds or 0)
        findings.extend(
            Finding(f.level, f.text)
            for f in format_findings(
                campaign=campaign, audience=audience, skips=skips, now=now, finishes_at=finishes_at
            )
        )
    _number_check(campaign, report, now)
    if audience is not None:
        report.cost = campaign_cost_estimate(campaign=campaign)
        # With no rate card at all the estimate says so itself: no finding per recipient.
        if report.cost.unpriced and report.cost.card_currency:
            findings.append(
                Finding(
                    WARNING,
                    f"{report.cost.unpriced:,} recipients have no {report.cost.category} "
                    "price on the rate card: the estimate leaves them out.",
                )
            )
    return report


def _mapping_check(campaign: Campaign, findings: list[Finding]) -> bool:
    try:
        mapping_validate(campaign.template, campaign.param_mapping)
    except ParamMappingError as exc:
        findings.append(Finding(ERROR, f"Parameter mapping: {exc}."))
        return False
    return True


def _engagement_check(campaign: Campaign, findings: list[Finding]) -> None:
    """The A/B test's variants and the tracked links, as the launch checks them."""
    variants = campaign_variants(campaign) if campaign.ab_test_percent else []
    sends = [(v.template, v.param_mapping) for v in variants]
    findings.extend(Finding(ERROR, f"A/B test: {e}.") for e in variants_errors(campaign, sends))
    sends.append((campaign.template, campaign.param_mapping))
    try:
        tracked = any(mapping_has_click(mapping) for _, mapping in sends)
    except (KeyError, TypeError, AttributeError):  # a malformed mapping: reported above
        tracked = False
    if tracked:
        findings.extend(
            Finding(ERROR, f"Tracked link: {e}.") for e in tracked_link_errors(campaign, sends)
        )


def _fields_to_check(campaign: Campaign) -> list[str]:
    # The phone is never empty (E.164 constraint); everything else may be.
    return [f for f in required_fields(campaign.param_mapping) if f != "phone"]


# One pass over the audience. ``skip.reason`` is the launch's own skip rule
# (delivery.campaigns.skips, exclusions included): the count per reason is each
# subtraction. With mapped fields to check, a second pass counts each one's empty values
# and names the first few, over the contacts the launch checks (not opted out, as
# campaign_validate does).
_AUDIENCE_SQL = """
SELECT skip.reason, count(*)
  FROM campaigns_contact AS c
  CROSS JOIN LATERAL (SELECT {reason} AS reason) AS skip
 WHERE {audience}
 GROUP BY skip.reason
"""

# Per mapped field, the contacts the launch would refuse for lacking it, and the first few.
_MISSING_SQL = """
SELECT 0 {missing}
  FROM campaigns_contact AS c
 WHERE {audience}
"""

# The included lists' entries, and their distinct contacts: the duplicates across lists.
_LIST_ENTRIES_SQL = """
SELECT count(*), count(DISTINCT contact_id)
  FROM campaigns_listmembership
 WHERE contact_list_id = ANY(%(list_ids)s)
"""

# The audience by country and skip reason. The key is a phone's first five characters
# under +1 (there the area code decides the country: Canada and Jamaica share +1 with the
# US), its first four elsewhere (a calling code and a digit: calling codes are
# prefix-free), or a user id's country prefix; Python turns the few hundred keys into
# countries (campaigns.audience.regions), so the database does no per-row lookup.
_BY_COUNTRY_SQL = """
SELECT CASE WHEN c.phone IS NULL THEN split_part(c.user_id, '.', 1) || '.'
            WHEN c.phone LIKE '+1%%' THEN left(c.phone, 5)
            ELSE left(c.phone, 4) END,
       skip.reason,
       count(*)
  FROM campaigns_contact AS c
  CROSS JOIN LATERAL (SELECT {reason} AS reason) AS skip
 WHERE {audience}
 GROUP BY 1, 2
"""


def _empty_sql(index: int, name: str) -> str:
    if name == "name":
        return "c.name = ''"
    return f"coalesce(c.attributes ->> %(field{index})s, '') = ''"


def _audience_count(
    report: PreflightReport, audience: Audience, skips: SkipRules, fields: list[str]
) -> None:
    params: dict[str, Any] = {**skips.params, "list_ids": list(audience.list_ids)}
    missing_sql = ""
    for index, name in enumerate(fields):
        condition = f"c.opted_out_at IS NULL AND {_empty_sql(index, name)}"
        missing_sql += (
            f",\n count(*) FILTER (WHERE {condition}),"
            "\n (array_agg(COALESCE(c.phone, c.user_id) ORDER BY c.id)"
            f" FILTER (WHERE {condition}))"
            f"[1:{MISSING_EXAMPLES}]"
        )
        params[f"field{index}"] = name
    reason = skips.reason_sql("c")
    with connection.cursor() as cursor:
        cursor.execute(_AUDIENCE_SQL.format(reason=reason, audience=audience.condition), params)
        rows = cursor.fetchall()
        missing_row: Sequence[Any] = ()
        if fields:
            cursor.execute(
                _MISSING_SQL.format(missing=missing_sql, audience=audience.condition), params
            )
            missing_row = cursor.fetchone()[1:]
        cursor.execute(_BY_COUNTRY_SQL.format(reason=reason, audience=audience.condition), params)
        report.countries = countries_from_keys(cursor.fetchall())
        if audience.list_ids:
            cursor.execute(_LIST_ENTRIES_SQL, params)
            report.memberships, report.list_contacts = (int(v) for v in cursor.fetchone())
    for reason_text, count in rows:
        count = int(count)
        report.contacts += count
        if reason_text == OPTED_OUT:
            report.opted_out += count
        elif reason_text in (US_NUMBER, US_USER_ID):
            report.us_blocked += count
        elif reason_text == USER_ID_REFUSED:
            report.user_id_refused += count
        elif reason_text == NO_LANGUAGE:
            report.no_language += count
        elif reason_text == HOLDOUT:
            report.holdout += count
        elif reason_text:
            report.left_out[reason_text] = report.left_out.get(reason_text, 0) + count
    report.left_out = dict(sorted(report.left_out.items(), key=lambda kv: (-kv[1], kv[0])))
    for index, name in enumerate(fields):
        count, examples = missing_row[2 * index], missing_row[2 * index + 1]
        if count:
            report.missing.append(MissingField(name, int(count), list(examples or [])))


# The sendable audience by the language each recipient will be sent (a campaign in many
# languages): the launch's own expression (delivery.campaigns.languages).
_LANGUAGES_SQL = """
SELECT {language}, count(*)
  FROM campaigns_contact AS c
 WHERE {audience}
   AND {sendable}
 GROUP BY 1
"""


def _languages_count(report: PreflightReport, audience: Audience, skips: SkipRules) -> None:
    plan = skips.languages
    if plan is None:
        return
    report.language_fallback = plan.fallback
    report.languages_left_out = dict(plan.left_out)
    sql = _LANGUAGES_SQL.format(
        language=plan.language_sql("c"),
        audience=audience.condition,
        sendable=skips.sendable_sql("c"),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, skips.params)
        counts = {str(language): int(n) for language, n in cursor.fetchall()}
    report.languages = {language: counts.get(language, 0) for language in sorted(plan.templates)}


# The sendable audience's contacts whose marketing sends in the cap's window already reach
# it: what the cap would stop if they were sent now. The same count as the claim's check
# (delivery.engine.frequency_cap), over the audience at once.
_CAPPED_SQL = """
SELECT count(*)
  FROM campaigns_contact AS c
 WHERE {audience}
   AND {sendable}
   AND (SELECT count(*)
          FROM delivery_message AS m
          JOIN campaigns_template AS t ON t.id = m.template_id
         WHERE m.contact_id = c.id
           AND t.category = 'MARKETING'
           AND m.send_status IN ('sending', 'sent', 'unknown')
           AND COALESCE(m.sent_at, m.claimed_at)
               > now() - make_interval(secs => %(cap_window_s)s)) >= %(cap_limit)s
"""


def _frequency_cap_count(
    campaign: Campaign, report: PreflightReport, audience: Audience, skips: SkipRules
) -> None:
    cap = campaign_frequency_cap(campaign)
    if cap is None:
        return
    report.frequency_cap = str(cap)
    sql = _CAPPED_SQL.format(audience=audience.condition, sendable=skips.sendable_sql("c"))
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {**skips.params, "cap_window_s": cap.window.total_seconds(), "cap_limit": cap.limit},
        )
        report.capped_now = int(cursor.fetchone()[0])


def _key_region(key: str) -> str:
    """A country key of ``_BY_COUNTRY_SQL`` → a region code, or '' where none is known."""
    if key.endswith("."):  # a user id's prefix
        return user_id_region(key + "0") or ""
    if key.startswith("+1"):
        return nanp_area_regions().get(key, "")
    return calling_code_region(key) or ""


def countries_from_keys(rows: Sequence[Sequence[Any]]) -> list[CountryLine]:
    """Rows of (country key, skip reason, contacts) → one line per country, largest first."""
    lines: dict[str, CountryLine] = {}
    for key, reason, count in rows:
        region = _key_region(str(key))
        line = lines.get(region)
        if line is None:
            name = region_name(region) if region else "Unknown country"
            line = lines[region] = CountryLine(region, name)
        line.contacts += int(count)
        if reason:
            line.skipped[reason] = line.skipped.get(reason, 0) + int(count)
    return sorted(lines.values(), key=lambda line: (-line.contacts, line.name))


def _audience_findings(report: PreflightReport) -> None:
    findings = report.findings
    for missing in report.missing:
        findings.append(
            Finding(
                ERROR,
                f"{missing.contacts:,} contact(s) have no value for mapped field "
                f"'{missing.field}' (e.g. {', '.join(missing.examples)}): the launch refuses "
                "until the mapping or the contacts are fixed.",
            )
        )
    if report.audience <= 0:
        findings.append(Finding(ERROR, "Nobody to send to after opt-outs and skipped numbers."))
    if report.us_blocked:
        findings.append(
            Finding(
                WARNING,
                f"{report.us_blocked:,} US recipient(s) will be skipped: Meta does not "
                "deliver marketing templates to US numbers (+1 with a US area code) or to "
                "user ids issued for them. Other +1 countries (Canada, the Caribbean) are "
                "sent.",
            )
        )
    if report.no_language:
        findings.append(
            Finding(
                WARNING,
                f"{report.no_language:,} recipient(s) have no approved language and will be "
                "skipped: choose a fallback language to send them one.",
            )
        )
    for language, reason in report.languages_left_out.items():
        findings.append(Finding(WARNING, f"The {language} version is not sent: {reason}."))
    if report.user_id_refused:
        findings.append(
            Finding(
                WARNING,
                f"{report.user_id_refused:,} contact(s) known only by a WhatsApp user id will "
                f"be skipped: Meta does not send {report.user_id_refusal} to user ids "
                "(error 131062).",
            )
        )
    if report.opted_out:
        findings.append(Finding(INFO, f"{report.opted_out:,} opted-out contact(s) skipped."))
    for reason, count in report.left_out.items():
        findings.append(Finding(INFO, f"{count:,} left out: {_left_out_text(reason)}."))
    if report.capped_now:
        findings.append(
            Finding(
                WARNING,
                f"{report.capped_now:,} recipient(s) already had {report.frequency_cap} and "
                "would be capped if sent now (the cap is applied as each message goes).",
            )
        )
    if report.duplicates:
        findings.append(
            Finding(
                INFO,
                f"{report.duplicates:,} duplicate list entr(y/ies) across lists: each person "
                "gets one message.",
            )
        )


def _left_out_text(reason: str) -> str:
    """A skip reason of the audience's exclusions, as the pre-flight's sentence says it."""
    return reason.replace("left out: ", "", 1)


def _limit_check(campaign: Campaign, report: PreflightReport) -> None:
    """The portfolio's tier and the users it reached in the last 24 h, whatever the tier:
    an unlimited portfolio's senders keep no Redis set, so its reach is read from the
    table (it used to be left at 0, reading "Reached in the last 24 h: 0" after thousands
    of sends)."""
    account = campaign.phone_number.account
    report.tier = account.messaging_limit_tier
    report.tier_limit = TIER_LIMITS.get(account.messaging_limit_tier, 250)
    conn = get_redis()
    # Redis holds the live set; when it is missing (restart, or an unlimited portfolio
    # that never budgets) the table knows the same users.
    if report.tier_limit is not None and conn.exists(reach_key(account.waba_id)):
        report.reach_used = reach_used(waba_id=account.waba_id, conn=conn)
    else:
        report.reach_used = len(reach_from_table(waba_id=account.waba_id))


# This audience's contacts any campaign sent to in the last 24 h, and those of them a number
# of this portfolio sent to. Through delivery_message.contact_id (indexed as a foreign key):
# the audience's rows only, never a scan of the day's messages.
_AUDIENCE_REACHED_SQL = """
SELECT count(DISTINCT m.contact_id),
       count(DISTINCT m.contact_id) FILTER (WHERE p.account_id = %(account_id)s)
  FROM delivery_message AS m
  JOIN campaigns_phonenumber AS p ON p.id = m.phone_number_id
  JOIN campaigns_contact AS c ON c.id = m.contact_id
 WHERE {audience}
   AND m.kind = 'campaign'
   AND m.sent_at >= %(since)s
"""


def _audience_reached(
    campaign: Campaign, report: PreflightReport, audience: Audience, now: datetime
) -> None:
    params: dict[str, Any] = {
        **audience.params,
        "account_id": campaign.phone_number.account_id,
        "since": now - timedelta(hours=24),
    }
    with connection.cursor() as cursor:
        cursor.execute(_AUDIENCE_REACHED_SQL.format(audience=audience.condition), params)
        reached, here = cursor.fetchone()
    report.audience_reached, report.audience_reached_here = int(reached), int(here)


def _limit_finding(report: PreflightReport) -> None:
    if report.over_headroom:
        report.findings.append(
            Finding(
                WARNING,
                f"Messaging limit: the portfolio may reach {report.tier_limit:,} unique users "
                f"a rolling 24 h and has reached {report.reach_used:,}; up to "
                f"{report.over_headroom:,} recipient(s) wait for room, about "
                f"{report.limit_days} more day(s).",
            )
        )


def _eta_check(campaign: Campaign, report: PreflightReport, now: datetime) -> None:
    report.rate_per_second = campaign_share_rate(campaign=campaign)
    if report.audience > 0 and report.rate_per_second > 0:
        report.eta_seconds = round(report.audience / report.rate_per_second, 1)
    window = campaign_window(campaign)
    if window is not None and report.audience > 0 and (report.lists or report.segments):
        report.window = str(window)
        report.window_finishes_at = campaign_window_eta(campaign=campaign, now=now).finishes_at


def _number_check(campaign: Campaign, report: PreflightReport, now: datetime) -> None:
    number = campaign.phone_number
    if number.paused_until and number.paused_until > now:
        report.findings.append(
            Finding(
                WARNING,
                f"Number {number} is paused until {number.paused_until:%Y-%m-%d %H:%M} UTC"
                + (f": {number.paused_reason}" if number.paused_reason else "."),
            )
        )
    if number.quality_rating == QualityRating.RED:
        report.findings.append(Finding(WARNING, f"Number {number} has a low (RED) quality rating."))
