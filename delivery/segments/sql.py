"""A segment's rules as one SQL condition over the contact alias ``c``.

Every value, attribute name and list id is a bound parameter (``%(s0)s``, …), never
spliced into the text: a hostile attribute name or value is just data. The text is built
only from this module's constants.

Why each shape:

* An attribute is ``c.attributes ->> %(key)s``: text, whatever JSON type the upload stored
  (a number 42 reads "42"), so equality compares text and an order (gt, lt, …) compares
  only the values that parse as the rule's kind: numbers by a pattern before the cast,
  dates by ``wb_text_date`` (migration delivery 0015), which answers NULL for a value that
  is not a real date instead of failing the statement. A value that does not parse does
  not match (and under ``not`` does).
* ``ne`` is "not equal", so a contact without the attribute matches it (``IS DISTINCT
  FROM``), as a marketer reading "city is not São Paulo" expects.
* List membership, a campaign's outcome and recent marketing are ``EXISTS (… = c.id)``.
  Alone or under AND, PostgreSQL turns it into a semi-join and reads the set once (the
  list's entries, the campaign's messages); under OR or NOT it probes an index per contact
  (membership by list and contact, messages by contact), a few microseconds each, however
  large the set. ``c.id IN (SELECT …)`` was the first form: under OR, a set larger than
  ``work_mem`` cannot be hashed and PostgreSQL re-ran the subquery for every contact,
  scanning the set each time (a million-entry list OR a segment: a launch still running
  after eight minutes, against 2.2 s hashed and 3.5 s probed). EXISTS is never NULL, so
  ``NOT`` of it needs no care for NULL ids.
* Replies are matched to the contact as the customer page matches them (phone or user id)
  on the webhooks' inbound table, named here as text: the launch, which uses segments,
  sits below the webhooks app and cannot import it. A quick-reply tap (``tapped``) is such
  a reply of type ``button`` (or ``interactive``) whose text is the button's, compared
  case-insensitively (``lower`` on both sides: what a marketer types need not match the
  template's capitals).
* A click (``clicked``) is a person's: link-preview fetchers' requests (``is_preview``) are
  machines, not people. It is the contact's when the click names them or its message
  does. ``delivered_not_clicked`` is exactly "delivered and not clicked", so the two split
  the delivered with nobody in both. A conversion (``converted``) is one the conversions
  service attributed to the campaign (``campaign_id``) for that contact, however it was
  attributed (delivered, clicked, or a holdout's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from campaigns.audience.regions import region_phone_prefixes
from delivery.models import MessageKind
from delivery.models import MessageStatus as S
from delivery.segments.rules import (
    AllOf,
    AnyOf,
    CampaignOutcome,
    FieldRule,
    InList,
    MarketingWithin,
    Not,
    Rule,
    RuleError,
)

_COLUMNS = {"phone": "c.phone", "name": "c.name"}
_DATE_COLUMNS = {"created": "c.created_at", "opted_in": "c.opted_in_at"}
_ORDER_SQL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_NUMBER_PATTERN = r"^\s*[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)\s*$"

# What each outcome means in a message's status (the replied and opted-out outcomes are
# read from the replies and the contact instead).
_OUTCOME_STATUSES: dict[str, tuple[str, ...]] = {
    "not_sent": (S.PENDING, S.SKIPPED, S.CANCELLED),
    "sent": (S.SENT, S.DELIVERED, S.READ),
    "failed": (S.FAILED, S.DEAD),
    "delivered": (S.DELIVERED, S.READ),
    "delivered_not_read": (S.DELIVERED,),
    "read": (S.READ,),
}
_INBOUND_TABLE = "webhooks_inboundmessage"
# The inbound kinds that are a tap on a button (delivery.engagement.buttons.TAP_TYPES).
_TAP_TYPES = ("button", "interactive")


@dataclass
class _Params:
    prefix: str = "s"
    values: dict[str, Any] = field(default_factory=dict)

    def bind(self, value: Any) -> str:
        name = f"{self.prefix}{len(self.values)}"
        self.values[name] = value
        return f"%({name})s"


@dataclass(frozen=True)
class SegmentSql:
    """A condition over ``c`` and its parameters, to go into a statement's WHERE."""

    condition: str
    params: dict[str, Any]


def segment_sql(
    rule: Rule, *, list_ids: dict[str, int], path: str = "rules", prefix: str = "s"
) -> SegmentSql:
    """``rule`` as SQL; ``list_ids`` maps the list names the rules use to their ids
    (``segment_list_ids``); a name missing from it is a ``RuleError``. Parameters are
    named ``{prefix}0``, ``{prefix}1``, …: segments sharing one statement take different
    prefixes."""
    params = _Params(prefix)
    return SegmentSql(_condition(rule, params, list_ids, path), params.values)


def _condition(rule: Rule, params: _Params, list_ids: dict[str, int], path: str) -> str:
    if isinstance(rule, AllOf | AnyOf):
        joiner = " AND " if isinstance(rule, AllOf) else " OR "
        kind = "all" if isinstance(rule, AllOf) else "any"
        parts = [
            _condition(r, params, list_ids, f"{path}.{kind}[{i}]") for i, r in enumerate(rule.rules)
        ]
        return "(" + joiner.join(parts) + ")"
    if isinstance(rule, Not):
        # A rule over a missing value is NULL; "not" of it must match, not vanish.
        return f"(({_condition(rule.rule, params, list_ids, f'{path}.not')}) IS NOT TRUE)"
    if isinstance(rule, FieldRule):
        return _field(rule, params)
    if isinstance(rule, InList):
        if rule.list_name not in list_ids:
            raise RuleError(f"{path}.list", f"no contact list is named {rule.list_name!r}")
        return (
            "EXISTS (SELECT 1 FROM campaigns_listmembership AS lm"
            f" WHERE lm.contact_list_id = {params.bind(list_ids[rule.list_name])}"
            " AND lm.contact_id = c.id)"
        )
    if isinstance(rule, CampaignOutcome):
        return _outcome(rule, params)
    if isinstance(rule, MarketingWithin):
        return (
            "EXISTS (SELECT 1 FROM delivery_message AS m"
            " JOIN campaigns_template AS t ON t.id = m.template_id"
            f" WHERE m.contact_id = c.id AND m.kind = '{MessageKind.CAMPAIGN}'"
            " AND t.category = 'MARKETING'"
            f" AND m.sent_at >= now() - make_interval(days => {params.bind(rule.days)}))"
        )
    raise TypeError(f"not a rule: {rule!r}")  # pragma: no cover - the union is exhaustive


def _outcome(rule: CampaignOutcome, params: _Params) -> str:
    campaign = params.bind(rule.campaign_id)
    if rule.outcome == "replied":
        return (
            "c.id IN (SELECT c2.id FROM campaigns_contact AS c2"
            f" JOIN {_INBOUND_TABLE} AS i ON i.campaign_id = {campaign}"
            " AND (i.from_phone = c2.phone OR i.from_user_id = c2.user_id))"
        )
    if rule.outcome == "tapped":
        # As "replied", narrowed to taps on the named button.
        return (
            "c.id IN (SELECT c2.id FROM campaigns_contact AS c2"
            f" JOIN {_INBOUND_TABLE} AS i ON i.campaign_id = {campaign}"
            " AND (i.from_phone = c2.phone OR i.from_user_id = c2.user_id)"
            f" WHERE i.type = ANY({params.bind(list(_TAP_TYPES))})"
            f" AND lower(i.text) = lower({params.bind(rule.button)}))"
        )
    if rule.outcome == "opted_out":
        return (
            "(c.opted_out_at IS NOT NULL AND EXISTS (SELECT 1 FROM delivery_message AS m"
            f" WHERE m.contact_id = c.id AND m.campaign_id = {campaign}"
            " AND m.sent_at IS NOT NULL AND m.sent_at <= c.opted_out_at))"
        )
    if rule.outcome == "clicked":
        return _clicked(campaign)
    if rule.outcome == "delivered_not_clicked":
        delivered = _status_outcome(campaign, "delivered", params)
        return f"({delivered} AND NOT {_clicked(campaign)})"
    if rule.outcome == "converted":
        # Conversions attributed to a message the campaign sent: a holdout contact's
        # conversion (attributed_by 'holdout', delivery.engagement.conversions) is the
        # control group's, not someone the campaign converted.
        return (
            "EXISTS (SELECT 1 FROM delivery_conversion AS v"
            f" WHERE v.contact_id = c.id AND v.campaign_id = {campaign}"
            " AND v.attributed_by <> 'holdout')"
        )
    return _status_outcome(campaign, rule.outcome, params)


def _status_outcome(campaign: str, outcome: str, params: _Params) -> str:
    statuses = params.bind(list(_OUTCOME_STATUSES[outcome]))
    return (
        "EXISTS (SELECT 1 FROM delivery_message AS m"
        f" WHERE m.contact_id = c.id AND m.campaign_id = {campaign}"
        f" AND m.status = ANY({statuses}))"
    )


def _clicked(campaign: str) -> str:
    """A person's click on the campaign, the contact's by the click or by its message.

    ``campaign`` is the bound placeholder already in the statement (used twice, bound
    once). The clicks are read by ``click_campaign_message_idx`` (campaign, message).
    """
    return (
        "EXISTS (SELECT 1 FROM delivery_click AS k"
        " LEFT JOIN delivery_message AS km ON km.id = k.message_id"
        f" WHERE k.campaign_id = {campaign} AND NOT k.is_preview"
        " AND (k.contact_id = c.id OR km.contact_id = c.id))"
    )


def _field(rule: FieldRule, params: _Params) -> str:
    if rule.field == "country":
        return _country(rule, params)
    if rule.field in _DATE_COLUMNS:
        column = _DATE_COLUMNS[rule.field]
        if rule.op == "exists":
            return f"({column} IS {'NOT ' if rule.value else ''}NULL)"
        day = f"({column} AT TIME ZONE 'UTC')::date"
        operator = "=" if rule.op == "eq" else _ORDER_SQL[rule.op]
        return f"({day} {operator} {params.bind(rule.value)})"
    text = _COLUMNS.get(rule.field) or f"(c.attributes ->> {params.bind(rule.field)})"
    if rule.op == "exists":
        present = f"(COALESCE({text}, '') <> '')"
        return present if rule.value else f"(NOT {present})"
    if rule.op == "eq":
        return f"({text} = {params.bind(rule.value)})"
    if rule.op == "ne":
        return f"({text} IS DISTINCT FROM {params.bind(rule.value)})"
    if rule.op == "in":
        return f"({text} = ANY({params.bind(list(rule.value))}))"
    if rule.op == "contains":
        return f"(strpos(lower({text}), lower({params.bind(str(rule.value))})) > 0)"
    if rule.op == "starts_with":
        return f"starts_with(lower({text}), lower({params.bind(str(rule.value))}))"
    operator = _ORDER_SQL[rule.op]
    if isinstance(rule.value, Decimal):
        # The CASE keeps the cast from ever seeing text that is not a number.
        number = f"(CASE WHEN {text} ~ '{_NUMBER_PATTERN}' THEN ({text})::numeric END)"
        return f"({number} {operator} {params.bind(rule.value)})"
    if isinstance(rule.value, date):
        return f"(wb_text_date({text}) {operator} {params.bind(rule.value)})"
    raise TypeError(f"an order over {rule.value!r}")  # pragma: no cover - checked by rules


def _country(rule: FieldRule, params: _Params) -> str:
    regions = rule.value if rule.op == "in" else (rule.value,)
    prefixes = [f"{p}%" for region in regions for p in region_phone_prefixes(region)]
    user_ids = [f"{region}.%" for region in regions]
    # A contact with a phone is placed by it (as the launch's US rule does); one known
    # only by its user id, by the id's country prefix.
    matches = (
        f"((c.phone IS NOT NULL AND c.phone LIKE ANY({params.bind(prefixes)}))"
        f" OR (c.phone IS NULL AND c.user_id LIKE ANY({params.bind(user_ids)})))"
    )
    return f"({matches} IS NOT TRUE)" if rule.op == "ne" else matches
