"""Template analytics as Meta counts them, from what the simulator really did.

``GET /{version}/{waba_id}/template_analytics`` answers in Meta's documented shape
("Analytics", https://developers.facebook.com/documentation/business-messaging/whatsapp/analytics,
Updated 2026-04-20)::

    {"data": [{"granularity": "DAILY", "product_type": "cloud_api",
               "data_points": [{"template_id", "start", "end", "sent", "delivered", "read",
                                "clicked": [{"type", "button_content", "count"}],
                                "cost": [{"type": "amount_spent", "value"}, ...]}]}],
     "paging": {"cursors": {"before", "after"}}}

Counted per template, product (Cloud API or the Marketing Messages API) and UTC day of the
send: ``sent`` for every accepted send that did not fail, ``delivered`` and ``read`` for the
statuses it planned to call back, ``clicked`` for the taps and link clicks posted through
``/_sim/events`` (``quick_reply_button``; ``url_button`` and ``unique_url_button``, one per
recipient and message), and ``cost`` as ``cost_per_delivery`` for each delivery (0 by
default; set ``TemplateAnalytics.cost_per_delivery``). A day with nothing counted has no
data point (an assumption: Meta's page does not show an empty day).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

CLOUD_API = "cloud_api"
MARKETING_MESSAGES = "marketing_messages_api_for_whatsapp"
PRODUCT_TYPES = {"CLOUD_API": CLOUD_API, "MARKETING_MESSAGES_API_FOR_WHATSAPP": MARKETING_MESSAGES}
METRICS = ("SENT", "DELIVERED", "READ", "CLICKED", "COST")
MAX_TEMPLATE_IDS = 10
DAY = 86_400


class AnalyticsQueryError(ValueError):
    """A request Meta would refuse (code 100): the message says which parameter."""


@dataclass
class _Tally:
    counts: Counter[str] = field(default_factory=Counter)  # sent, delivered, read
    clicks: Counter[tuple[str, str]] = field(default_factory=Counter)  # (type, button)
    clickers: set[tuple[str, str]] = field(default_factory=set)  # (wamid, button): unique


@dataclass(frozen=True)
class AnalyticsQuery:
    template_ids: tuple[str, ...]
    start: int  # the first day's 00:00 UTC
    end: int
    metrics: frozenset[str]
    product: str


class TemplateAnalytics:
    """Daily tallies per (product, template id, day start)."""

    def __init__(self, cost_per_delivery: float = 0.0) -> None:
        self.cost_per_delivery = cost_per_delivery
        self.tallies: dict[tuple[str, str, int], _Tally] = {}

    def _tally(self, product: str, template_id: str, wall: float) -> _Tally:
        key = (product, template_id, _day_start(wall))
        tally = self.tallies.get(key)
        if tally is None:
            tally = self.tallies[key] = _Tally()
        return tally

    def send(self, *, product: str, template_id: str, wall: float, statuses: list[str]) -> None:
        """An accepted send and the statuses planned for it (``failed`` counts nothing)."""
        if "failed" in statuses:
            return
        tally = self._tally(product, template_id, wall)
        tally.counts["sent"] += 1
        for status in ("delivered", "read"):
            tally.counts[status] += status in statuses

    def tap(self, *, product: str, template_id: str, wall: float, button: str) -> None:
        """A quick-reply tap on the send made at ``wall``."""
        self._tally(product, template_id, wall).clicks[("quick_reply_button", button)] += 1

    def url_click(
        self, *, product: str, template_id: str, wall: float, button: str, wamid: str
    ) -> None:
        """A URL click: every one, and once per message (the recipient) as unique."""
        tally = self._tally(product, template_id, wall)
        tally.clicks[("url_button", button)] += 1
        if (wamid, button) not in tally.clickers:
            tally.clickers.add((wamid, button))
            tally.clicks[("unique_url_button", button)] += 1

    def report(self, query: AnalyticsQuery) -> dict[str, Any]:
        wanted = set(query.template_ids)
        points = [
            self._point(template_id, day, tally, query.metrics)
            for (product, template_id, day), tally in sorted(
                self.tallies.items(), key=lambda item: (item[0][2], item[0][1])
            )
            if product == query.product
            and template_id in wanted
            and query.start <= day < max(query.end, query.start + 1)
        ]
        entry = {"granularity": "DAILY", "product_type": query.product, "data_points": points}
        return {
            "data": [entry],
            "paging": {"cursors": {"before": "MAZDZD", "after": "MjQZD"}},
        }

    def _point(
        self, template_id: str, day: int, tally: _Tally, metrics: frozenset[str]
    ) -> dict[str, Any]:
        point: dict[str, Any] = {"template_id": template_id, "start": day, "end": day + DAY}
        for metric in ("sent", "delivered", "read"):
            if metric.upper() in metrics:
                point[metric] = tally.counts[metric]
        if "CLICKED" in metrics and tally.clicks:
            point["clicked"] = [
                {"type": kind, "button_content": button, "count": n}
                for (kind, button), n in sorted(tally.clicks.items())
            ]
        if "COST" in metrics:
            delivered = tally.counts["delivered"]
            spent = round(delivered * self.cost_per_delivery, 4)
            per_delivered = round(spent / delivered, 4) if delivered else 0
            point["cost"] = [
                {"type": "amount_spent", "value": spent},
                {"type": "cost_per_delivered", "value": per_delivered},
            ]
        return point


def analytics_query(query: dict[str, str]) -> AnalyticsQuery:
    """The request's parameters as Meta reads them, or ``AnalyticsQueryError``.

    ``start``/``end`` in unix seconds or YYYY-MM-DD (start moved back to 00:00 UTC);
    ``granularity`` DAILY (any case); ``template_ids`` a JSON array or comma list, 1 to 10;
    ``metric_types`` a JSON array or comma list (none: all); ``product_type`` optional.
    """
    start, end = _time(query, "start"), _time(query, "end")
    if str(query.get("granularity", "")).upper() != "DAILY":
        raise AnalyticsQueryError("granularity must be DAILY")
    ids = _list(query.get("template_ids", ""))
    if not ids:
        raise AnalyticsQueryError("template_ids is required")
    if len(ids) > MAX_TEMPLATE_IDS:
        raise AnalyticsQueryError(f"template_ids: at most {MAX_TEMPLATE_IDS}")
    metrics = {m.upper() for m in _list(query.get("metric_types", ""))} or set(METRICS)
    unknown = metrics - set(METRICS)
    if unknown:
        raise AnalyticsQueryError(f"metric_types: unknown {', '.join(sorted(unknown))}")
    product_name = str(query.get("product_type") or "CLOUD_API").upper()
    if product_name not in PRODUCT_TYPES:
        raise AnalyticsQueryError(f"product_type: unknown {product_name}")
    return AnalyticsQuery(
        tuple(ids), _day_start(start), end, frozenset(metrics), PRODUCT_TYPES[product_name]
    )


def _time(query: dict[str, str], name: str) -> int:
    value = str(query.get(name, "")).strip()
    if value.isdigit():
        return int(value)
    try:
        return int(datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp())
    except ValueError:
        raise AnalyticsQueryError(f"{name}: a unix timestamp or YYYY-MM-DD") from None


def _list(value: str) -> list[str]:
    text = value.strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError:
            items = text.strip("[]").split(",")
        if not isinstance(items, list):
            items = [items]
    else:
        items = text.split(",")
    return [str(i).strip().strip("'\"") for i in items if str(i).strip()]


def _day_start(wall: float) -> int:
    return int(wall) // DAY * DAY
