"""The campaigns API's rules: reading a create request, finding a key's campaigns, the
checks a draft needs before ``campaigns.drafts.campaign_create``, and every answer's shape.

``delivery.api`` and ``delivery.campaigns`` are independent layers, so nothing here calls
a campaign run's services: the view calls them (launch, pause, pre-flight, counts, costs)
and hands their results to the renderers below. Each refusal names its field: 400 for what
the request alone shows, 403 / 404 / 409 / 422 for what the database says.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from campaigns.catalogue.params import ParamMappingError, mapping_validate
from campaigns.drafts import MAX_ATTRIBUTION_DAYS, MAX_HOLDOUT_PERCENT, campaign_create
from campaigns.models import (
    Campaign,
    CampaignStatus,
    ContactList,
    PhoneNumber,
    Segment,
    Template,
    TemplateStatus,
)
from campaigns.windows.daily import SendWindow
from campaigns.windows.zones import zone_valid
from delivery.api.cursors import page_of
from delivery.api.errors import ApiProblem, invalid_fields
from delivery.api.keys import api_key_allows
from delivery.models import OPEN_STATUSES, ApiKey, MessageStatus
from whatsblast.core.frequency import frequency_cap_parse
from whatsblast.core.link_destinations import link_destination_errors
from whatsblast.core.storable import UNSTORABLE, text_storable

# Column sizes (campaigns.models), so nothing too long reaches PostgreSQL.
MAX_NAME = 200  # Campaign.name, ContactList.name, Segment.name
MAX_PHONE_NUMBER_ID = 64
MAX_TEMPLATE_NAME = 512
MAX_LANGUAGE = 16
MAX_LANGUAGE_FIELD = 100
MAX_FREQUENCY_CAP = 16
MAX_ZONE = 64
MAX_ZONE_ATTRIBUTE = 64
MAX_LINK = 2000
MAX_AUDIENCE_NAMES = 100  # names per audience part
WINDOW_TIME_PATTERN = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
# A frequency cap as the API takes it: "" (the site's), "off", N/Dd (1-366 days) or N/Hh
# (1-8784 hours), N from 1 to 9999. campaign_create's parser takes a little more (spaces).
FREQUENCY_CAP_PATTERN = (
    r"^(|[oO][fF][fF]|[1-9][0-9]{0,3}/"
    r"(([1-9]|[1-9][0-9]|[12][0-9]{2}|3[0-5][0-9]|36[0-6])[dD]"
    r"|([1-9]|[1-9][0-9]{1,2}|[1-7][0-9]{3}|8[0-6][0-9]{2}|87[0-7][0-9]|878[0-4])[hH]))$"
)
# A tracked link's destination: http(s), a site, then anything but spaces and controls,
# {{field}} placeholders included (whatsblast.core.link_destinations checks it whole).
LINK_PATTERN = (
    r"^[hH][tT][tT][pP][sS]?://[A-Za-z0-9.\-]+(:[0-9]{1,4})?"
    r"([/?#]([^\s\x00-\x1f\x7f-\x9f{}]|\{\{[A-Za-z0-9_.\-]+\}\})*)?$"
)
AUDIENCE_PARTS = ("lists", "segments", "exclude_lists", "exclude_segments")
TOP_LEVEL = frozenset(
    {
        "name",
        "phone_number_id",
        "template",
        "mapping",
        "audience",
        "frequency_cap",
        "frequency_cap_defer",
        "send_window",
        "link",
        "holdout_percent",
        "attribution_days",
    }
)
# What campaign_create cannot send with (PENDING or PAUSED may still become usable).
_UNUSABLE = (TemplateStatus.REJECTED, TemplateStatus.DISABLED, TemplateStatus.DELETED)


# --- reading a create request ----------------------------------------------------------------


@dataclass(frozen=True)
class CampaignDraft:
    """A ``POST /campaigns`` body, read: ``campaign_create``'s arguments."""

    name: str
    phone_number_id: str
    template_name: str
    language: str | None
    languages: bool
    language_field: str
    language_fallback: str
    mapping: dict[str, Any]
    lists: list[str]
    segments: list[str]
    exclude_lists: list[str]
    exclude_segments: list[str]
    frequency_cap: str
    frequency_cap_defer: bool
    window: SendWindow | None
    time_zone: str
    time_zone_attribute: str
    link_destination: str
    link_utm: bool
    holdout_percent: float
    attribution_days: int


@dataclass
class _Fields:
    """Collects what is wrong, one message per field path."""

    errors: dict[str, str] = field(default_factory=dict)

    def add(self, path: str, message: str) -> None:
        self.errors.setdefault(path, message)

    def unknown_keys(self, value: dict[str, Any], allowed: Sequence[str], prefix: str) -> None:
        for key in sorted(set(value) - set(allowed), key=repr)[:20]:
            self.add(f"{prefix}{_safe(key)}", "Unknown field.")

    def obj(self, value: Any, path: str) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            self.add(path, "Must be an object.")
            return None
        return value

    def text(
        self,
        value: Any,
        path: str,
        *,
        max_length: int,
        required: bool = False,
        blank: bool = False,
        default: str = "",
    ) -> str:
        if value is None:
            if required:
                self.add(path, "This field is required.")
            return default
        if not isinstance(value, str):
            self.add(path, "Must be a string.")
            return default
        if not value.strip() and not blank:
            self.add(path, "May not be empty.")
            return default
        if len(value) > max_length:
            self.add(path, f"At most {max_length} characters.")
            return default
        if not text_storable(value):
            self.add(path, UNSTORABLE)
            return default
        return value.strip()

    def flag(self, value: Any, path: str, *, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            self.add(path, "Must be true or false.")
            return default
        return value

    def names(self, value: Any, path: str) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(path, "Must be a list of names.")
            return []
        if len(value) > MAX_AUDIENCE_NAMES:
            self.add(path, f"At most {MAX_AUDIENCE_NAMES} names.")
            return []
        names = [self.text(v, f"{path}.{i}", max_length=MAX_NAME) for i, v in enumerate(value)]
        return list(dict.fromkeys(n for n in names if n))


def _safe(key: Any) -> str:
    text = str(key)
    return text if len(text) <= 64 and text_storable(text) else "(unnamed)"


def campaign_draft_parse(data: dict[str, Any]) -> CampaignDraft:
    """The body as a ``CampaignDraft``; a 400 naming every field at fault otherwise."""
    f = _Fields()
    f.unknown_keys(data, sorted(TOP_LEVEL), "")
    name = f.text(data.get("name"), "name", max_length=MAX_NAME, required=True)
    number = f.text(
        data.get("phone_number_id"),
        "phone_number_id",
        max_length=MAX_PHONE_NUMBER_ID,
        required=True,
    )
    template_name, language, languages, language_field, fallback = _template_part(
        data.get("template"), f
    )
    mapping = _mapping(data.get("mapping"), f)
    audience = _audience(data.get("audience"), f)
    cap = f.text(
        data.get("frequency_cap"), "frequency_cap", max_length=MAX_FREQUENCY_CAP, blank=True
    )
    if cap and not re.fullmatch(FREQUENCY_CAP_PATTERN, cap):
        f.add("frequency_cap", "N/Dd (at most N in D days, D up to 366), N/Hh, or off.")
    elif cap:
        try:
            frequency_cap_parse(cap)
        except ValueError as exc:  # pragma: no cover - the pattern admits only valid caps
            f.add("frequency_cap", str(exc))
    defer = f.flag(data.get("frequency_cap_defer"), "frequency_cap_defer", default=False)
    window, zone, zone_attribute = _send_window(data.get("send_window"), f)
    destination, utm = _link(data.get("link"), f)
    holdout = _number(data.get("holdout_percent"), "holdout_percent", 0.0, MAX_HOLDOUT_PERCENT, f)
    days = _whole(data.get("attribution_days"), "attribution_days", 1, MAX_ATTRIBUTION_DAYS, f)
    if f.errors:
        raise invalid_fields(f.errors)
    return CampaignDraft(
        name=name,
        phone_number_id=number,
        template_name=template_name,
        language=language,
        languages=languages,
        language_field=language_field,
        language_fallback=fallback,
        mapping=mapping,
        lists=audience["lists"],
        segments=audience["segments"],
        exclude_lists=audience["exclude_lists"],
        exclude_segments=audience["exclude_segments"],
        frequency_cap=cap,
        frequency_cap_defer=defer,
        window=window,
        time_zone=zone,
        time_zone_attribute=zone_attribute,
        link_destination=destination,
        link_utm=utm,
        holdout_percent=holdout,
        attribution_days=7 if days is None else days,
    )


def _template_part(value: Any, f: _Fields) -> tuple[str, str | None, bool, str, str]:
    template = f.obj(value, "template")
    if template is None:
        if value is None:
            f.add("template", "This field is required.")
        return "", None, False, "language", ""
    f.unknown_keys(template, ("name", "language", "languages"), "template.")
    name = f.text(
        template.get("name"), "template.name", max_length=MAX_TEMPLATE_NAME, required=True
    )
    language = f.text(template.get("language"), "template.language", max_length=MAX_LANGUAGE)
    many = f.obj(template.get("languages"), "template.languages")
    if many is None:
        return name, language or None, False, "language", ""
    f.unknown_keys(many, ("field", "fallback"), "template.languages.")
    language_field = f.text(
        many.get("field"),
        "template.languages.field",
        max_length=MAX_LANGUAGE_FIELD,
        default="language",
    )
    fallback = f.text(
        many.get("fallback"), "template.languages.fallback", max_length=MAX_LANGUAGE, blank=True
    )
    return name, language or None, True, language_field or "language", fallback


def _mapping(value: Any, f: _Fields) -> dict[str, Any]:
    if value is None:
        return {"body": {}}
    if not isinstance(value, dict):
        f.add("mapping", "Must be an object: {body, header, buttons, ...} (see the README).")
        return {}
    bad = _unstorable_path(value, "mapping")
    if bad:
        f.add(bad, UNSTORABLE)
    return value


def _unstorable_path(value: Any, path: str) -> str:
    """The path of the first text in ``value`` PostgreSQL cannot store, or ''."""
    if isinstance(value, str):
        return "" if text_storable(value) else path
    if isinstance(value, dict):
        for key, item in value.items():
            if not text_storable(str(key)):
                return path
            found = _unstorable_path(item, f"{path}.{_safe(key)}")
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _unstorable_path(item, f"{path}.{index}")
            if found:
                return found
    return ""


def _audience(value: Any, f: _Fields) -> dict[str, list[str]]:
    audience = f.obj(value, "audience")
    parts: dict[str, list[str]] = {part: [] for part in AUDIENCE_PARTS}
    if audience is None:
        if value is None:
            f.add("audience", "This field is required: give lists or segments.")
        return parts
    f.unknown_keys(audience, AUDIENCE_PARTS, "audience.")
    for part in AUDIENCE_PARTS:
        parts[part] = f.names(audience.get(part), f"audience.{part}")
    given = any(key.startswith("audience.") for key in f.errors)
    if not parts["lists"] and not parts["segments"] and not given:
        f.add("audience", "Give at least one list or segment.")
    return parts


def _send_window(value: Any, f: _Fields) -> tuple[SendWindow | None, str, str]:
    window = f.obj(value, "send_window")
    if window is None:
        return None, "", "timezone"
    f.unknown_keys(window, ("start", "end", "time_zone", "time_zone_attribute"), "send_window.")
    start = f.text(window.get("start"), "send_window.start", max_length=5, required=True)
    end = f.text(window.get("end"), "send_window.end", max_length=5, required=True)
    zone_text = f.text(window.get("time_zone"), "send_window.time_zone", max_length=MAX_ZONE)
    attribute = f.text(
        window.get("time_zone_attribute"),
        "send_window.time_zone_attribute",
        max_length=MAX_ZONE_ATTRIBUTE,
        default="timezone",
    )
    zone = ""
    if zone_text:
        zone = zone_valid(zone_text) or ""
        if not zone:
            f.add("send_window.time_zone", "Unknown time zone: use an IANA name such as UTC.")
    parsed: SendWindow | None = None
    if start and end:
        try:
            parsed = SendWindow.parse(f"{start}-{end}")
        except ValueError:
            f.add("send_window", "start and end are different times, HH:MM (09:00, 20:00).")
    return parsed, zone, attribute or "timezone"


def _link(value: Any, f: _Fields) -> tuple[str, bool]:
    link = f.obj(value, "link")
    if link is None:
        return "", True
    f.unknown_keys(link, ("destination", "utm"), "link.")
    destination = f.text(
        link.get("destination"), "link.destination", max_length=MAX_LINK, required=True
    )
    if destination and not re.fullmatch(LINK_PATTERN, destination):
        f.add("link.destination", "An http(s) address: https://shop.example.com/{{field}}.")
    for problem in link_destination_errors(destination) if destination else []:
        f.add("link.destination", problem)
    return destination, f.flag(link.get("utm"), "link.utm", default=True)


def _number(value: Any, path: str, low: float, high: float, f: _Fields) -> float:
    if value is None:
        return low
    if isinstance(value, bool) or not isinstance(value, int | float):
        f.add(path, "Must be a number.")
        return low
    if isinstance(value, float) and not math.isfinite(value):
        f.add(path, "Must be a finite number.")
        return low
    if not low <= value <= high:
        f.add(path, f"From {low:g} to {high:g}.")
        return low
    return float(value)


def _whole(value: Any, path: str, low: int, high: int, f: _Fields) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        f.add(path, "Must be a whole number.")
        return None
    if not low <= value <= high:
        f.add(path, f"From {low} to {high}.")
        return None
    return value


# --- creating a draft ------------------------------------------------------------------------


def campaign_draft_create(*, api_key: ApiKey, draft: CampaignDraft) -> Campaign:
    """Check what needs the database, each refusal naming its field, then create the draft
    with ``campaign_create`` (which checks it all again: it is the authority)."""
    number = _number_for(api_key, draft.phone_number_id)
    language = draft.language
    if draft.languages and not language:
        language = _language_for_many(number, draft.template_name, draft.language_fallback)
    template = _template_for(number, draft.template_name, language)
    _audience_check(draft)
    try:
        mapping_validate(template, draft.mapping)
    except ParamMappingError as exc:
        where = f"mapping.{exc.section}" if exc.section in draft.mapping else "mapping"
        raise ApiProblem(
            422,
            "param_mapping_mismatch",
            f"The mapping does not fit template {template.name} ({template.language}).",
            fields={where: str(exc)[:500]},
        ) from None
    try:
        return campaign_create(
            name=draft.name,
            phone_number_id=number.phone_number_id,
            template_name=template.name,
            list_names=draft.lists,
            param_mapping=draft.mapping,
            language=template.language,
            window=draft.window,
            time_zone=draft.time_zone,
            time_zone_attribute=draft.time_zone_attribute,
            segment_names=draft.segments,
            exclude_list_names=draft.exclude_lists,
            exclude_segment_names=draft.exclude_segments,
            frequency_cap=draft.frequency_cap,
            frequency_cap_defer=draft.frequency_cap_defer,
            languages=draft.languages,
            language_field=draft.language_field,
            language_fallback=draft.language_fallback,
            link_destination=draft.link_destination,
            link_utm=draft.link_utm,
            holdout_percent=draft.holdout_percent,
            attribution_days=draft.attribution_days,
        )
    except ValidationError as exc:  # a rule the checks above do not know yet
        raise ApiProblem(
            422,
            "invalid_campaign",
            "The campaign cannot be created as given.",
            fields={"campaign": "; ".join(exc.messages)[:500]},
        ) from None


def _number_for(api_key: ApiKey, phone_number_id: str) -> PhoneNumber:
    """The number, in the key's scope (the transactional send's rule: a scoped key learns
    nothing of numbers outside its scope, not even whether they exist)."""
    number = (
        PhoneNumber.objects.select_related("account")
        .filter(phone_number_id=phone_number_id)
        .first()
    )
    if number is not None and api_key_allows(api_key=api_key, phone_number_pk=number.pk):
        return number
    if number is None and api_key.all_numbers:
        raise ApiProblem(
            422,
            "unknown_phone_number",
            "No phone number with this id is configured.",
            fields={"phone_number_id": "Unknown phone number id."},
        )
    raise ApiProblem(
        403,
        "phone_number_not_allowed",
        "This API key may not use this phone number.",
        fields={"phone_number_id": "Not in this API key's phone numbers."},
    )


def _language_for_many(number: PhoneNumber, name: str, fallback: str) -> str | None:
    """The version a campaign in many languages holds: its fallback when approved, else
    the first approved language (``campaigns.drafts`` picks the same)."""
    approved = sorted(
        Template.objects.filter(
            account=number.account, name=name, status=TemplateStatus.APPROVED
        ).values_list("language", flat=True)
    )
    if fallback in approved:
        return fallback
    return approved[0] if approved else None


def _template_for(number: PhoneNumber, name: str, language: str | None) -> Template:
    versions = list(Template.objects.filter(account=number.account, name=name))
    if not versions:
        raise ApiProblem(
            422,
            "unknown_template",
            f"No template {name!r} for this phone number's business account.",
            fields={"template.name": "Unknown template."},
        )
    languages = sorted(t.language for t in versions)
    if language:
        versions = [t for t in versions if t.language == language]
        if not versions:
            raise ApiProblem(
                422,
                "unknown_template",
                f"Template {name!r} has no {language} version.",
                fields={"template.language": f"Not one of its languages: {', '.join(languages)}."},
            )
    if len(versions) > 1:
        raise ApiProblem(
            422,
            "unknown_template",
            f"Template {name!r} exists in several languages.",
            fields={"template.language": f"Choose one of {', '.join(languages)}."},
        )
    template = versions[0]
    if template.status in _UNUSABLE:
        raise ApiProblem(
            422,
            "template_not_approved",
            f"Template {name!r} ({template.language}) is {template.status}.",
            fields={"template.name": f"{template.status}: it cannot be sent."},
        )
    return template


def _audience_check(draft: CampaignDraft) -> None:
    """Every list and segment named exists: 422 naming each missing one."""
    lists = set(
        ContactList.objects.filter(name__in=[*draft.lists, *draft.exclude_lists]).values_list(
            "name", flat=True
        )
    )
    segments = set(
        Segment.objects.filter(name__in=[*draft.segments, *draft.exclude_segments]).values_list(
            "name", flat=True
        )
    )
    fields: dict[str, str] = {}
    code = ""
    for part, known, what in (
        ("lists", lists, "list"),
        ("exclude_lists", lists, "list"),
        ("segments", segments, "segment"),
        ("exclude_segments", segments, "segment"),
    ):
        for index, name in enumerate(getattr(draft, part)):
            if name not in known:
                fields[f"audience.{part}.{index}"] = f"No {what} named {name!r}."
                code = code or f"unknown_{what}"
    if fields:
        raise ApiProblem(
            422, code, "The audience names lists or segments that do not exist.", fields=fields
        )


# --- finding a key's campaigns ---------------------------------------------------------------


def campaigns_of_key(api_key: ApiKey) -> QuerySet[Campaign]:
    """The campaigns on the key's phone numbers, with what their answer shows."""
    campaigns = Campaign.objects.select_related("phone_number", "template").prefetch_related(
        "lists", "segments", "exclude_lists", "exclude_segments"
    )
    if not api_key.all_numbers:
        campaigns = campaigns.filter(phone_number__in=api_key.phone_numbers.all())
    return campaigns


def campaign_of_key(*, api_key: ApiKey, campaign_id: int) -> Campaign:
    """The campaign, or 404 when there is none or it is on a number outside the key's
    scope (the two look the same: ids of other numbers' campaigns stay secret)."""
    campaign = campaigns_of_key(api_key).filter(pk=campaign_id).first()
    if campaign is None:
        raise ApiProblem(404, "not_found", "No such campaign.")
    return campaign


def status_filter_parse(raw: str | None) -> str | None:
    """``?status=``: absent means any; present, it must be a status (empty is not one)."""
    if raw is None:
        return None
    if raw not in CampaignStatus.values:
        raise invalid_fields({"status": f"One of {', '.join(CampaignStatus.values)}."})
    return raw


def campaigns_page(
    campaigns: QuerySet[Campaign],
    *,
    cursor: str | None,
    limit: int,
    counts_of: Callable[[list[int]], dict[int, dict[str, int]]],
    url_of: Callable[[int], str],
) -> dict[str, Any]:
    """A page of campaigns, their message counts read in one call for the page."""
    page = page_of(campaigns, cursor=cursor, limit=limit)
    counts = counts_of([c.pk for c in page.rows])
    return {
        "data": [
            campaign_render(c, counts=counts.get(c.pk, {}), url=url_of(c.pk)) for c in page.rows
        ],
        "next_cursor": page.next_cursor,
    }


# --- transitions -----------------------------------------------------------------------------


def launch_at_parse(data: dict[str, Any]) -> datetime | None:
    """``{"at": ISO 8601 with an offset}`` (or ``{}``: now) → when to launch."""
    f = _Fields()
    f.unknown_keys(data, ("at",), "")
    at = data.get("at")
    when: datetime | None = None
    if at is not None:
        text = f.text(at, "at", max_length=64)
        parsed = _datetime(text) if text else None
        if parsed is None or timezone.is_naive(parsed):
            f.add("at", "A date and time with an offset, e.g. 2026-12-01T09:00:00-03:00.")
        else:
            when = _in_utc(parsed)
            if when is None:
                f.add("at", "A moment UTC can hold (before the year 10000).")
    if f.errors:
        raise invalid_fields(f.errors)
    return when


def _in_utc(at: datetime) -> datetime | None:
    """``at`` in UTC; a moment before UTC's first is past (now), one after its last (9999 at
    -05:00) cannot be scheduled: None."""
    try:
        return at.astimezone(UTC)
    except (OverflowError, ValueError):
        return timezone.now() if at.year == 1 else None


def _datetime(text: str) -> datetime | None:
    try:
        return parse_datetime(text)
    except ValueError:
        return None


def status_conflict(campaign: Campaign, *, status: str, action: str) -> ApiProblem:
    """409: the transition does not apply to the campaign as it stands."""
    return ApiProblem(
        409,
        "campaign_status_conflict",
        f"Campaign {campaign.pk} is {status}: it cannot be {action}.",
        fields={"status": status},
    )


def launch_refused(reason: str, findings: Sequence[dict[str, Any]]) -> ApiProblem:
    """422: the launch refused; the reason, and the pre-flight's blocking findings."""
    fields = {"launch": reason[:500]}
    errors = [f for f in findings if f.get("level") == "error"]
    fields.update({f"findings.{i}": str(f.get("text", ""))[:500] for i, f in enumerate(errors)})
    return ApiProblem(
        422, "launch_refused", "The campaign cannot be launched as it stands.", fields=fields
    )


# --- answers ---------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def progress_of(counts: dict[str, int]) -> dict[str, Any]:
    """Messages in all, settled, still to settle and the share settled (0 to 100)."""
    total = sum(counts.values())
    remaining = sum(counts.get(status, 0) for status in OPEN_STATUSES)
    done = total - remaining
    return {
        "total": total,
        "done": done,
        "remaining": remaining,
        # Never 100 before the last message settles (99.96 % reads 99.9).
        "percent": min(round(100 * done / total, 1), 99.9 if remaining else 100.0)
        if total
        else 0.0,
    }


def campaign_render(campaign: Campaign, *, counts: dict[str, int], url: str) -> dict[str, Any]:
    """A campaign as the API shows it. ``counts``: its messages by status (from the
    counters PostgreSQL keeps, ``delivery.campaigns.status_counts``)."""
    template = campaign.template
    by_status = {status: int(counts.get(status, 0)) for status in MessageStatus.values}
    window = None
    if campaign.window_start is not None and campaign.window_end is not None:
        window = {
            "start": f"{campaign.window_start:%H:%M}",
            "end": f"{campaign.window_end:%H:%M}",
            "time_zone": campaign.time_zone,
            "time_zone_attribute": campaign.time_zone_attribute,
        }
    return {
        "id": campaign.pk,
        "name": campaign.name,
        "status": campaign.status,
        "status_reason": campaign.status_reason,
        "phone_number_id": campaign.phone_number.phone_number_id,
        "template": {
            "name": template.name,
            "language": template.language,
            "category": template.category,
            "status": template.status,
        },
        "languages": (
            {"field": campaign.language_field, "fallback": campaign.language_fallback}
            if campaign.languages
            else None
        ),
        "mapping": campaign.param_mapping,
        "audience": {
            part: sorted(item.name for item in getattr(campaign, part).all())
            for part in AUDIENCE_PARTS
        },
        "frequency_cap": campaign.frequency_cap,
        "frequency_cap_defer": campaign.frequency_cap_defer,
        "send_window": window,
        "link": (
            {"destination": campaign.link_destination, "utm": campaign.link_utm}
            if campaign.link_destination
            else None
        ),
        "holdout_percent": campaign.holdout_percent,
        "attribution_days": campaign.attribution_days,
        "counts": by_status,
        "progress": progress_of(by_status),
        "created_at": _iso(campaign.created_at),
        "updated_at": _iso(campaign.updated_at),
        "scheduled_at": _iso(campaign.scheduled_at),
        "started_at": _iso(campaign.started_at),
        "completed_at": _iso(campaign.completed_at),
        "url": url,
    }


def launch_render(
    campaign: Campaign, *, summary: dict[str, Any], counts: dict[str, int], url: str
) -> dict[str, Any]:
    """The launch's answer: the campaign, and what the launch made of its audience."""
    return {
        "campaign": campaign_render(campaign, counts=counts, url=url),
        "launch": {
            "already_started": bool(summary["already_started"]),
            "recipients": int(summary["recipients"]),
            "pending": int(summary["pending"]),
            "skipped": int(summary["skipped"]),
            "waiting_for_window": int(summary["waiting_for_window"]),
        },
    }


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole > 0 else None


def _money(value: Any) -> str | None:
    return None if value is None else f"{value:.4f}"


# A rate is a figure over the stage before it (the report's percentages, as fractions).
RATES = (
    ("delivered", "delivered", "sent"),
    ("read", "read", "delivered"),
    ("replied", "replies", "delivered"),
    ("failed", "failed", "audience"),
    ("clicked", "clicks", "delivered"),
)


def report_render(
    campaign: Campaign,
    *,
    counts: dict[str, int],
    figures: dict[str, int],
    failures: Sequence[dict[str, Any]],
    skips: Sequence[dict[str, Any]],
    cost: dict[str, Any],
    cost_lines: Sequence[dict[str, Any]],
    clicks: Any,
    roi: Any,
    by_language: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The report's figures. ``figures``: the one vocabulary of outcomes (audience, sent,
    delivered, ...) with replies and opt-outs; ``clicks``: ``delivery.engagement.clicks.
    ClickCounts``; ``roi``: ``delivery.engagement.roi.CampaignRoi``."""
    values = {**figures, "clicks": int(clicks.unique)}
    finished = campaign.first_completed_at or campaign.completed_at
    duration = (
        (finished - campaign.started_at).total_seconds()
        if campaign.started_at and finished
        else None
    )
    lift = roi.lift
    return {
        "campaign_id": campaign.pk,
        "status": campaign.status,
        "counts": {status: int(counts.get(status, 0)) for status in MessageStatus.values},
        "figures": {key: int(value) for key, value in figures.items()},
        "rates": {
            name: _ratio(values.get(part, 0), values.get(base, 0)) for name, part, base in RATES
        },
        "failures": [dict(group) for group in failures],
        "skips": [dict(skip) for skip in skips],
        "by_language": [dict(line) for line in by_language],
        "cost": cost,
        "costs": [dict(line) for line in cost_lines],
        "clicks": {
            "total": int(clicks.total),
            "unique": int(clicks.unique),
            "previews": int(clicks.previews),
        },
        "conversions": {
            "attribution_days": int(campaign.attribution_days),
            "conversions": int(roi.conversions),
            "holdout_conversions": int(roi.holdout_conversions),
            "currency": roi.currency,
            "revenue": _money(roi.revenue),
            "revenue_by_currency": {c: _money(v) for c, v in roi.revenue_by_currency.items()},
            "conversions_by_currency": dict(roi.conversions_by_currency),
            "messages_sent": int(roi.messages_sent),
            "revenue_per_message": _money(roi.revenue_per_message),
            "cost_known": bool(roi.cost_known),
            "return_on_spend": _money(roi.return_on_spend),
            "lift": None
            if lift is None
            else {
                "treated": int(lift.treated),
                "treated_converted": int(lift.treated_converted),
                "control": int(lift.control),
                "control_converted": int(lift.control_converted),
                "treated_rate": lift.treated_rate,
                "control_rate": lift.control_rate,
                "window_days": int(lift.window_days),
                "complete": bool(lift.complete),
            },
            "notes": list(roi.notes),
        },
        "started_at": _iso(campaign.started_at),
        "completed_at": _iso(campaign.completed_at),
        "duration_seconds": duration,
    }
