"""What Meta says a number and its account are: read from the Graph API, never guessed.

``GET /{phone_number_id}`` gives the display number, the verified name and its review
status, the quality rating, the messaging limit (the portfolio's, since October 2025) and
the throughput level; ``GET /{waba_id}`` the account's review status. ``phonenumber add``
reads them at once and a periodic job every ``GRAPH_READ_INTERVAL_SECONDS``; each row
keeps when it was last read and the error if the read failed (a refused token says so).

``GET /{waba_id}/template_analytics`` gives Meta's own daily counts per template: sent,
delivered, read, button clicks by type and text, and cost (``template_analytics_read``;
the report's copy, cached a few minutes, is ``campaign_template_analytics``). Meta's page:
"Analytics", https://developers.facebook.com/documentation/business-messaging/whatsapp/analytics
(Updated 2026-04-20): ``start`` and ``end`` in unix seconds (moved back to 00:00 UTC),
``granularity=DAILY``, at most 10 ``template_ids``, ``metric_types`` (SENT, DELIVERED, READ,
CLICKED, COST, ...), ``product_type`` (Cloud API unless
``MARKETING_MESSAGES_API_FOR_WHATSAPP``); 90 days back at most, reads and clicks only for 7
days after a send, and not for WABAs of the EU, the UK or Japan.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import redis
import requests
from django.conf import settings
from django.utils import timezone

from campaigns.models import (
    BusinessAccount,
    Campaign,
    MessagingLimitTier,
    PhoneNumber,
    QualityRating,
    Template,
    TemplateCategory,
)
from delivery.cloud.client import (
    ACCOUNT_FIELDS,
    MESSAGING_LIMIT_FIELD,
    MESSAGING_LIMIT_FIELD_V23,
    ApiError,
    bearer,
    get_client,
    network_error,
    number_fields,
    parse_graph_node,
)
from whatsblast.core import queues
from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

_DUE_KEY = "wb:graph-read:due"
# Meta's throughput levels: STANDARD is 80 msg/s, HIGH up to 1,000. HIGH raises the
# configured rate to 1,000; under STANDARD the configured rate stands (a lower one is an
# operator's choice, a higher one meets 130429s and the adaptive rate follows them down).
HIGH_THROUGHPUT_RATE = 1000
# Older tier names: a smaller limit than ours is taken as our smallest (never a larger one).
_TIER_ALIASES = {"TIER_50": MessagingLimitTier.TIER_250, "TIER_1K": MessagingLimitTier.TIER_250}


@dataclass(frozen=True)
class GraphRead:
    phone_number_id: str
    ok: bool
    changed: tuple[str, ...]
    error: str = ""


def _error_text(error: ApiError) -> str:
    code = f"code {error.code}" if error.code is not None else f"HTTP {error.http_status}"
    return f"{code}: {error.title}"[:500]


def _tier(data: dict[str, Any]) -> str:
    """The portfolio's tier from either version's field (a string such as "TIER_2K"), the
    v24+ one first; anything else reads as unknown and changes nothing."""
    for key in (MESSAGING_LIMIT_FIELD, MESSAGING_LIMIT_FIELD_V23):
        value = data.get(key)
        value = value.upper() if isinstance(value, str) else ""
        value = _TIER_ALIASES.get(value, value)
        if value in MessagingLimitTier.values:
            return value
    return ""


def phone_number_graph_read(*, phone_number: PhoneNumber) -> GraphRead:
    """Read the number and its account from Meta and record what they say."""
    client = get_client()
    base = str(phone_number.api_base_url or settings.WHATSAPP_API_BASE_URL)
    now = timezone.now()
    result = client.get_node(
        base_url=base,
        node_id=phone_number.phone_number_id,
        access_token=phone_number.access_token,
        fields=number_fields(client.api_version),
    )
    if isinstance(result, ApiError):
        error = _error_text(result)
        PhoneNumber.objects.filter(pk=phone_number.pk).update(graph_error=error, graph_read_at=now)
        logger.warning("number %s not read from Meta: %s", phone_number.phone_number_id, error)
        return GraphRead(phone_number.phone_number_id, False, (), error)
    data = result.data
    changed = _number_apply(phone_number, data)
    phone_number.graph_read_at, phone_number.graph_error = now, ""
    phone_number.save(update_fields=[*changed, "graph_read_at", "graph_error", "updated_at"])
    changed += _account_read(phone_number.account, base, phone_number, data)
    return GraphRead(phone_number.phone_number_id, True, tuple(changed))


def _number_apply(number: PhoneNumber, data: dict[str, Any]) -> list[str]:
    values: dict[str, Any] = {}
    if data.get("display_phone_number"):
        values["display_phone_number"] = str(data["display_phone_number"])[:32]
    values["verified_name"] = str(data.get("verified_name") or "")[:200]
    values["name_status"] = str(data.get("name_status") or "").upper()[:32]
    quality = str(data.get("quality_rating") or "").upper()
    if quality:
        values["quality_rating"] = quality if quality in QualityRating.values else "UNKNOWN"
    throughput = data.get("throughput")
    level = str(throughput.get("level") or "").upper() if isinstance(throughput, dict) else ""
    values["throughput_level"] = level[:32]
    if level == "HIGH":
        values["rate_per_second"] = HIGH_THROUGHPUT_RATE
    changed = [name for name, value in values.items() if getattr(number, name) != value]
    for name in changed:
        setattr(number, name, values[name])
    return changed


def _account_read(
    account: BusinessAccount, base: str, number: PhoneNumber, data: dict[str, Any]
) -> list[str]:
    """The portfolio's limit (given on the number) and the account's own fields."""
    fields: list[str] = []
    tier = _tier(data)
    if tier and tier != account.messaging_limit_tier:
        account.messaging_limit_tier = tier
        fields.append("messaging_limit_tier")
    result = get_client().get_node(
        base_url=base,
        node_id=account.waba_id,
        access_token=number.access_token,
        fields=ACCOUNT_FIELDS,
    )
    account.graph_read_at = timezone.now()
    if isinstance(result, ApiError):
        account.graph_error = _error_text(result)
    else:
        account.graph_error = ""
        review = str(result.data.get("account_review_status") or "").upper()[:32]
        if review != account.account_review_status:
            account.account_review_status = review
            fields.append("account_review_status")
        onboarding = str(result.data.get("marketing_messages_onboarding_status") or "")[:48]
        if onboarding and onboarding.upper() != account.mm_onboarding_status:
            account.mm_onboarding_status = onboarding.upper()
            fields.append("mm_onboarding_status")
        if not account.name and result.data.get("name"):
            account.name = str(result.data["name"])[:200]
            fields.append("name")
    account.save(update_fields=[*fields, "graph_read_at", "graph_error", "updated_at"])
    return fields


def numbers_graph_read_all() -> list[GraphRead]:
    """Read every number (the periodic job)."""
    numbers = PhoneNumber.objects.select_related("account").order_by("pk")
    return [phone_number_graph_read(phone_number=number) for number in numbers]


def graph_read_schedule() -> bool:
    """Enqueue the periodic read unless one was enqueued within the interval."""
    interval = int(settings.GRAPH_READ_INTERVAL_SECONDS)
    if interval <= 0 or not get_redis().set(_DUE_KEY, 1, nx=True, ex=interval):
        return False
    queues.enqueue(queues.GRAPH_READ)
    return True


# --- Meta's template analytics -----------------------------------------------------------------

ANALYTICS_METRICS = ("SENT", "DELIVERED", "READ", "CLICKED", "COST")
MAX_ANALYTICS_TEMPLATES = 10  # Meta: template_ids, at most 10 a request
ANALYTICS_LOOKBACK = timedelta(days=90)  # Meta keeps template analytics 90 days
ANALYTICS_CACHE_SECONDS = 300
ANALYTICS_FAILURE_CACHE_SECONDS = 60
MM_PRODUCT_TYPE = "MARKETING_MESSAGES_API_FOR_WHATSAPP"
_ANALYTICS_KEY = "wb:template-analytics:{campaign_id}"
_MAX_PAGES = 50  # a runaway ``paging.next`` chain stops here


class TemplateAnalyticsError(Exception):
    """Meta refused the read (or answered something else); the message says why."""


@dataclass(frozen=True)
class TemplateButtonClicks:
    """One entry of a data point's ``clicked``: ``quick_reply_button``, ``url_button`` (every
    click) or ``unique_url_button`` (distinct WhatsApp accounts), and the button's text."""

    type: str
    button: str
    count: int


@dataclass(frozen=True)
class TemplateAnalyticsDay:
    """One template's day (UTC) as Meta counted it."""

    template_id: str  # Meta's template id (Template.meta_template_id)
    day: date
    sent: int
    delivered: int
    read: int
    clicked: tuple[TemplateButtonClicks, ...] = ()
    cost: Decimal | None = None  # amount_spent; None when Meta gives none (partner billing)

    @property
    def clicks(self) -> int:
        """Every button click of the day (quick replies and URL buttons; the unique-URL
        entry counts the same clicks again by person, so it is left out)."""
        return sum(c.count for c in self.clicked if c.type != "unique_url_button")


def template_analytics_read(
    account: BusinessAccount,
    template_ids: list[str],
    start: datetime,
    end: datetime,
    *,
    product_type: str = "",
) -> list[TemplateAnalyticsDay]:
    """Meta's daily counts for ``template_ids`` (Meta's ids) between ``start`` and ``end``.

    Read with the token (and API base) of the account's first number, ten templates a
    request, following ``paging.next``. Raises ``TemplateAnalyticsError`` when Meta refuses
    (a bad token, analytics not confirmed for the WABA, a region without them).
    """
    number = PhoneNumber.objects.filter(account=account).order_by("pk").first()
    if number is None:
        raise TemplateAnalyticsError(f"account {account.waba_id} has no number to read with")
    ids = [str(i) for i in dict.fromkeys(template_ids) if str(i)]
    days: list[TemplateAnalyticsDay] = []
    for first in range(0, len(ids), MAX_ANALYTICS_TEMPLATES):
        query = {
            "start": str(int(start.timestamp())),
            "end": str(int(end.timestamp())),
            "granularity": "DAILY",
            "template_ids": json.dumps(ids[first : first + MAX_ANALYTICS_TEMPLATES]),
            "metric_types": ",".join(ANALYTICS_METRICS),
        }
        if product_type:
            query["product_type"] = product_type
        days += _analytics_pages(number, query)
    return days


def _analytics_pages(number: PhoneNumber, query: dict[str, str]) -> list[TemplateAnalyticsDay]:
    client = get_client()
    base = str(number.api_base_url or settings.WHATSAPP_API_BASE_URL).rstrip("/")
    url: str | None = f"{base}/{client.api_version}/{number.account.waba_id}/template_analytics"
    params: dict[str, str] | None = query
    days: list[TemplateAnalyticsDay] = []
    for _ in range(_MAX_PAGES):
        if url is None:
            break
        data = _graph_get(client.session, url, params, number, client.timeout)
        for entry in data.get("data") or []:
            if isinstance(entry, dict):
                days += [_analytics_day(p) for p in entry.get("data_points") or []]
        paging = data.get("paging")
        following = paging.get("next") if isinstance(paging, dict) else None
        # ``next`` is a whole URL with the query in it; Graph gives it only when more follow.
        url, params = (str(following), None) if following else (None, None)
    return days


def _graph_get(
    session: requests.Session,
    url: str,
    params: dict[str, str] | None,
    number: PhoneNumber,
    timeout: tuple[float, float],
) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        response = session.get(
            url, params=params, headers={"Authorization": bearer(number.access_token)},
            timeout=timeout,
        )  # fmt: skip
        result = parse_graph_node(
            status=response.status_code,
            body=response.content,
            headers=response.headers,
            latency_s=time.perf_counter() - started,
        )
    except requests.RequestException as exc:
        result = network_error(exc, latency_s=time.perf_counter() - started)
    if isinstance(result, ApiError):
        raise TemplateAnalyticsError(_error_text(result))
    return result.data


def _analytics_day(point: Any) -> TemplateAnalyticsDay:
    point = point if isinstance(point, dict) else {}
    clicked = tuple(
        TemplateButtonClicks(
            str(c.get("type") or ""), str(c.get("button_content") or ""), _count(c.get("count"))
        )
        for c in point.get("clicked") or []
        if isinstance(c, dict)
    )
    cost = None
    for item in point.get("cost") or []:
        if isinstance(item, dict) and item.get("type") == "amount_spent":
            cost = _decimal(item.get("value"))
    return TemplateAnalyticsDay(
        template_id=str(point.get("template_id") or ""),
        day=datetime.fromtimestamp(_count(point.get("start")), tz=UTC).date(),
        sent=_count(point.get("sent")),
        delivered=_count(point.get("delivered")),
        read=_count(point.get("read")),
        clicked=clicked,
        cost=cost,
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


@dataclass(frozen=True)
class CampaignTemplateAnalytics:
    """Meta's counts of a campaign's templates since it started, for the report."""

    days: list[TemplateAnalyticsDay] = field(default_factory=list)
    # Meta's template id -> "name (language)", for the templates asked about.
    templates: dict[str, str] = field(default_factory=dict)
    error: str = ""  # why Meta's counts could not be read ("" when they were)
    read_at: str = ""  # ISO time of the read (a cached copy keeps its own)


def campaign_templates(campaign: Campaign) -> list[Template]:
    """The templates a campaign sends: its own, its A/B arms', and, when it sends each
    recipient their language, every approved language version of its template's name."""
    templates = [campaign.template, *(v.template for v in campaign.variants.all())]
    if campaign.languages:
        templates += Template.objects.filter(
            account_id=campaign.template.account_id, name=campaign.template.name
        )
    return list({t.pk: t for t in templates}.values())


def campaign_template_analytics(campaign: Campaign) -> CampaignTemplateAnalytics:
    """Meta's daily counts for the campaign's templates from its start (at most 90 days
    back) to now; cached in Redis for ``ANALYTICS_CACHE_SECONDS`` (a report opened again
    reads no Graph); a failed read for ``ANALYTICS_FAILURE_CACHE_SECONDS``, so that while
    the Graph API is down a report opened again answers at once, saying why, rather than
    waiting out the client's timeout on every view.

    An account that sends marketing through the Marketing Messages API has those counted
    under their own product type: both are read and each template's day added up.
    """
    key = _ANALYTICS_KEY.format(campaign_id=campaign.pk)
    cached = _cache_get(key)
    if cached:
        return _analytics_loads(cached)
    templates = {
        t.meta_template_id: f"{t.name} ({t.language})" for t in campaign_templates(campaign)
    }
    templates.pop("", None)
    if campaign.started_at is None or not templates:
        why = "not started" if campaign.started_at is None else "no template has Meta's id yet"
        return CampaignTemplateAnalytics(templates=templates, error=why)
    now = timezone.now()
    start = max(campaign.started_at, now - ANALYTICS_LOOKBACK)
    account = campaign.template.account
    products = [""]
    if account.marketing_messages_api and any(
        t.category == TemplateCategory.MARKETING for t in campaign_templates(campaign)
    ):
        products.append(MM_PRODUCT_TYPE)
    try:
        days = [
            day
            for product in products
            for day in template_analytics_read(
                account, list(templates), start, now, product_type=product
            )
        ]
    except TemplateAnalyticsError as exc:
        logger.warning("template analytics of campaign %s not read: %s", campaign.pk, exc)
        failed = CampaignTemplateAnalytics(templates=templates, error=str(exc))
        _cache_set(key, _analytics_dumps(failed), ANALYTICS_FAILURE_CACHE_SECONDS)
        return failed
    result = CampaignTemplateAnalytics(_days_added(days), templates, "", now.isoformat())
    _cache_set(key, _analytics_dumps(result), ANALYTICS_CACHE_SECONDS)
    return result


def _cache_get(key: str) -> bytes | str | None:
    """The cached read, or None; without Redis the report reads Meta instead (no page may
    fail for Redis)."""
    try:
        value = get_redis().get(key)
    except redis.RedisError:
        return None
    return value if isinstance(value, bytes | str) else None


def _cache_set(key: str, value: str, seconds: int) -> None:
    try:
        get_redis().set(key, value, ex=seconds)
    except redis.RedisError:
        logger.warning("template analytics not cached: Redis unavailable")


def _days_added(days: list[TemplateAnalyticsDay]) -> list[TemplateAnalyticsDay]:
    """One entry per (template, day): the product types' counts added up."""
    merged: dict[tuple[str, date], TemplateAnalyticsDay] = {}
    for day in days:
        key = (day.template_id, day.day)
        seen = merged.get(key)
        if seen is None:
            merged[key] = day
            continue
        clicks: dict[tuple[str, str], int] = {}
        for c in (*seen.clicked, *day.clicked):
            clicks[(c.type, c.button)] = clicks.get((c.type, c.button), 0) + c.count
        costs = [c for c in (seen.cost, day.cost) if c is not None]
        merged[key] = TemplateAnalyticsDay(
            day.template_id,
            day.day,
            seen.sent + day.sent,
            seen.delivered + day.delivered,
            seen.read + day.read,
            tuple(TemplateButtonClicks(t, b, n) for (t, b), n in clicks.items()),
            sum(costs, Decimal(0)) if costs else None,
        )
    return sorted(merged.values(), key=lambda d: (d.day, d.template_id))


def _analytics_dumps(result: CampaignTemplateAnalytics) -> str:
    return json.dumps(asdict(result), default=str)


def _analytics_loads(raw: bytes | str) -> CampaignTemplateAnalytics:
    data = json.loads(raw)
    days = [
        TemplateAnalyticsDay(
            template_id=d["template_id"],
            day=date.fromisoformat(d["day"]),
            sent=d["sent"],
            delivered=d["delivered"],
            read=d["read"],
            clicked=tuple(TemplateButtonClicks(**c) for c in d["clicked"]),
            cost=Decimal(d["cost"]) if d["cost"] is not None else None,
        )
        for d in data["days"]
    ]
    return CampaignTemplateAnalytics(days, data["templates"], data["error"], data["read_at"])
