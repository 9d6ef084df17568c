"""Who a campaign is addressed to, and whom it leaves out: the one place that says so.

A campaign's audience is everyone on its lists or in its segments. From them it leaves out
everyone on a suppression list (``ContactList.suppression``: staff, legal requests; every
campaign), on one of its excluded lists or in one of its excluded segments. The people
left out still get a row, ``skipped`` with the reason naming the list or segment, as
opt-outs and US numbers do (``delivery.campaigns.skips``): the pre-flight and the report
then show each subtraction as a number, and a follow-up can ask who was left out.

The launch's insert and its mapped-field check, the send-window schedule, the canary's
boundary, sender pools' homes, the cost estimate and the pre-flight all ask "who is on this
campaign"; each puts ``Audience.condition`` (over the contact alias ``c``) into its
statement and binds ``Audience.params`` beside its own, so a new way to choose recipients
is added here once.

Why this SQL: the lists are one ``EXISTS (… = ANY(lists) AND contact = c.id)``: alone,
PostgreSQL makes it a semi-join that reads the lists' entries once, so a contact on two
lists is one recipient; each segment is its own condition (``delivery.segments.sql``,
every value bound, its parameters prefixed per segment so several share a statement)
joined by OR, where the EXISTS becomes an index probe per contact (the membership table's
(list, contact) index). An exclusion is one more such condition in the skip reason's
CASE: a probe per row, not a second pass. (``IN (SELECT …)`` under OR degrades to a scan
of the whole list per contact once the list outgrows ``work_mem``: see
``delivery.segments.sql``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from campaigns.models import Campaign, ContactList, Segment
from delivery.segments.rules import RuleError
from delivery.segments.services import segment_compile

SUPPRESSED = "suppression list"
LEFT_OUT_LIST = "left out: list"
LEFT_OUT_SEGMENT = "left out: segment"
REACHED_BEFORE = "left out: reached by an earlier run"

# Reached by one of the campaigns (a recurring campaign's earlier runs): a message of one
# of them accepted by Meta. Through the contact_id index of delivery_message, a probe per
# row; ``send_status`` 'sent' covers delivered and read too.
_REACHED = (
    "EXISTS (SELECT 1 FROM delivery_message AS rm"
    " WHERE rm.contact_id = c.id AND rm.campaign_id = ANY(%({name})s)"
    " AND rm.send_status = 'sent')"
)

_IN_LIST = (
    "EXISTS (SELECT 1 FROM campaigns_listmembership AS lm"
    " WHERE lm.contact_list_id = %({name})s AND lm.contact_id = c.id)"
)


class AudienceError(ValueError):
    """A segment of the campaign no longer compiles (a list it names was deleted, …)."""


@dataclass(frozen=True)
class Exclusion:
    """Contacts a campaign leaves out: ``condition`` over ``c``; ``reason`` their rows'
    skip reason, bound as the parameter ``reason_param``."""

    reason: str
    condition: str
    reason_param: str


@dataclass(frozen=True)
class Audience:
    condition: str  # over ``c``: on an included list or in an included segment
    params: dict[str, Any]
    exclusions: tuple[Exclusion, ...] = ()
    list_ids: tuple[int, ...] = ()
    segment_names: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """No list and no segment: nobody could be addressed."""
        return not self.list_ids and not self.segment_names


def _included(list_ids: Sequence[int], segments: Sequence[Segment], params: dict[str, Any]) -> str:
    """Everyone on the lists or in the segments, as a condition over ``c``."""
    included: list[str] = []
    if list_ids:
        included.append(
            "EXISTS (SELECT 1 FROM campaigns_listmembership AS lm"
            " WHERE lm.contact_list_id = ANY(%(audience_list_ids)s) AND lm.contact_id = c.id)"
        )
        params["audience_list_ids"] = list(list_ids)
    for index, segment in enumerate(segments):
        compiled = _compile(segment.name, segment.rules, prefix=f"aud{index}_")
        included.append(compiled.condition)
        params.update(compiled.params)
    return "(" + " OR ".join(included) + ")" if included else "FALSE"


def audience_sample_ids(
    *, list_ids: Sequence[int], segment_ids: Sequence[int], limit: int
) -> list[int]:
    """The first ``limit`` contacts (by id, not opted out) of the lists and segments: whom
    the campaign form's preview shows. A segment that no longer compiles is left out."""
    segments = []
    for segment in Segment.objects.filter(pk__in=segment_ids).order_by("pk"):
        try:
            _compile(segment.name, segment.rules, prefix="check_")
        except AudienceError:
            continue
        segments.append(segment)
    params: dict[str, Any] = {"sample_limit": limit}
    condition = _included(list_ids, segments, params)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.id FROM campaigns_contact AS c"  # noqa: S608 - _included binds every value
            f" WHERE c.opted_out_at IS NULL AND {condition} ORDER BY c.id LIMIT %(sample_limit)s",
            params,
        )
        return [int(row[0]) for row in cursor.fetchall()]


def campaign_audience(campaign: Campaign) -> Audience:
    """The audience of ``campaign`` as it stands now (segments are read when used)."""
    params: dict[str, Any] = {}
    list_ids = tuple(campaign.lists.order_by("pk").values_list("pk", flat=True))
    segments = list(campaign.segments.order_by("pk"))
    condition = _included(list_ids, segments, params)
    exclusions: list[Exclusion] = []

    def exclude(reason: str, condition: str, extra: dict[str, Any]) -> None:
        reason_param = f"excl{len(exclusions)}_reason"
        exclusions.append(Exclusion(reason, condition, reason_param))
        params[reason_param] = reason[:200]
        params.update(extra)

    suppression = list(ContactList.objects.filter(suppression=True).order_by("name"))
    excluded_lists = [lst for lst in campaign.exclude_lists.order_by("name") if not lst.suppression]
    for lst in suppression:
        name = f"excl{len(exclusions)}_list"
        exclude(f"{SUPPRESSED} {lst.name}", _IN_LIST.format(name=name), {name: lst.pk})
    for lst in excluded_lists:
        name = f"excl{len(exclusions)}_list"
        exclude(f"{LEFT_OUT_LIST} {lst.name}", _IN_LIST.format(name=name), {name: lst.pk})
    for segment in campaign.exclude_segments.order_by("name"):
        compiled = _compile(segment.name, segment.rules, prefix=f"excl{len(exclusions)}_s")
        exclude(f"{LEFT_OUT_SEGMENT} {segment.name}", compiled.condition, compiled.params)
    reached = list(campaign.exclude_reached_campaigns.order_by("pk").values_list("pk", flat=True))
    if reached:
        name = f"excl{len(exclusions)}_reached"
        exclude(REACHED_BEFORE, _REACHED.format(name=name), {name: reached})
    return Audience(
        condition=condition,
        params=params,
        exclusions=tuple(exclusions),
        list_ids=list_ids,
        segment_names=tuple(s.name for s in segments),
    )


def _compile(name: str, rules: object, *, prefix: str) -> Any:
    try:
        return segment_compile(rules, prefix=prefix)
    except RuleError as exc:
        raise AudienceError(f"segment {name!r}: {exc}") from exc
