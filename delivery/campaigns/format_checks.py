"""What Meta's marketing formats need of each recipient, checked before the launch.

A mapping that fits the template (campaigns.catalogue.params) can still carry values Meta
refuses for some recipients, and each such send fails at Meta (132012) after it was
paid for in rate and reach. Checked here over the sendable audience, for the pre-flight
(as findings) and the launch (refused on an error):

* a coupon code (copy-code button) has 1 to 15 characters;
* a limited-time offer's expiry is a date and time (or Unix milliseconds) in the future,
  and one that falls before the campaign is expected to finish is worth a warning;
* a product message names a catalogue (its id mapped to something not blank).

Missing values of mapped fields are the launch's general check (``required_fields``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from campaigns.catalogue.params import (
    MAX_COUPON_CODE,
    coupon_sources,
    template_offer_expires,
)
from campaigns.models import Campaign
from delivery.campaigns.audience import Audience
from delivery.campaigns.skips import SkipRules
from whatsblast.core.template_values import offer_expiry_ms

ERROR = "error"
WARNING = "warning"
EXAMPLES = 5
# Distinct expiry values read to check them; beyond it the rest are not read.
MAX_EXPIRY_VALUES = 10_000


@dataclass(frozen=True)
class FormatFinding:
    level: str  # ERROR blocks the launch
    text: str


# A contact field's value over the sendable audience: how many have a bad length, and the
# first few (the value is the field as the launch renders it: attributes ->> field).
_COUPON_SQL = """
SELECT count(*), (array_agg(COALESCE(c.phone, c.user_id) ORDER BY c.id))[1:%(examples)s]
  FROM campaigns_contact AS c
 WHERE {audience}
   AND {sendable}
   AND NOT char_length({value}) BETWEEN 1 AND %(max_length)s
"""

_EXPIRY_VALUES_SQL = """
SELECT {value}, count(*)
  FROM campaigns_contact AS c
 WHERE {audience}
   AND {sendable}
 GROUP BY 1
 LIMIT %(max_values)s
"""


def format_findings(
    *,
    campaign: Campaign,
    audience: Audience,
    skips: SkipRules,
    now: datetime,
    finishes_at: datetime | None = None,
) -> list[FormatFinding]:
    """What the campaign's format needs and some recipients' values do not give."""
    template = campaign.template
    mapping = campaign.param_mapping
    findings: list[FormatFinding] = []
    for source in coupon_sources(template, mapping):
        findings.extend(_coupon_check(source, audience, skips))
    if template_offer_expires(template) and isinstance(mapping.get("offer"), dict):
        findings.extend(_offer_check(mapping["offer"], audience, skips, now, finishes_at))
    catalog = mapping.get("catalog")
    if isinstance(catalog, dict) and "value" in catalog and not catalog["value"].strip():
        findings.append(FormatFinding(ERROR, "The catalogue id is blank."))
    return findings


def _value_sql(source: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The source's text per contact, as the launch renders it (fallback included)."""
    if source["field"] in ("name", "phone"):
        sql = f"coalesce(c.{source['field']}, '')"
        params: dict[str, Any] = {}
    else:
        sql, params = "coalesce(c.attributes ->> %(fmt_field)s, '')", {"fmt_field": source["field"]}
    if source.get("fallback"):
        sql = f"coalesce(nullif(btrim({sql}), ''), %(fmt_fallback)s)"
        params["fmt_fallback"] = source["fallback"]
    return sql, params


def _coupon_check(
    source: dict[str, str], audience: Audience, skips: SkipRules
) -> list[FormatFinding]:
    if "value" in source:
        return []  # a constant was checked with the mapping
    value, params = _value_sql(source)
    sql = _COUPON_SQL.format(
        audience=audience.condition, sendable=skips.sendable_sql("c"), value=value
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql, {**skips.params, **params, "examples": EXAMPLES, "max_length": MAX_COUPON_CODE}
        )
        count, examples = cursor.fetchone()
    if not count:
        return []
    return [
        FormatFinding(
            ERROR,
            f"{count:,} recipients' coupon code ({source['field']}) is blank or longer than "
            f"{MAX_COUPON_CODE} characters, which Meta refuses (e.g. {', '.join(examples)}).",
        )
    ]


def _offer_check(
    source: dict[str, str],
    audience: Audience,
    skips: SkipRules,
    now: datetime,
    finishes_at: datetime | None,
) -> list[FormatFinding]:
    now_ms = int(now.timestamp() * 1000)
    end_ms = int(finishes_at.timestamp() * 1000) if finishes_at else now_ms
    if "value" in source:
        counts = {source["value"]: 1}
    else:
        value, params = _value_sql(source)
        sql = _EXPIRY_VALUES_SQL.format(
            audience=audience.condition, sendable=skips.sendable_sql("c"), value=value
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, {**skips.params, **params, "max_values": MAX_EXPIRY_VALUES})
            counts = {text: int(n) for text, n in cursor.fetchall()}
    unreadable = expired = before_end = 0
    for text, count in counts.items():
        expiry = offer_expiry_ms(text)
        if expiry is None:
            unreadable += count
        elif expiry <= now_ms:
            expired += count
        elif expiry <= end_ms:
            before_end += count
    where = (
        "The offer's expiry"
        if "value" in source
        else f"recipients' offer expiry ({source['field']})"
    )
    findings: list[FormatFinding] = []
    if "value" in source:
        if unreadable or expired:
            state = "is not a date and time" if unreadable else "is in the past"
            findings.append(FormatFinding(ERROR, f"{where} {state}: {source['value']}."))
        elif before_end:
            findings.append(
                FormatFinding(
                    WARNING,
                    f"{where} ({source['value']}) comes before the campaign is expected "
                    "to finish: later recipients would get an offer that has ended.",
                )
            )
        return findings
    if unreadable:
        findings.append(FormatFinding(ERROR, f"{unreadable:,} {where} is not a date and time."))
    if expired:
        findings.append(FormatFinding(ERROR, f"{expired:,} {where} is in the past."))
    if before_end:
        findings.append(
            FormatFinding(
                WARNING, f"{before_end:,} {where} comes before the campaign is expected to finish."
            )
        )
    return findings
