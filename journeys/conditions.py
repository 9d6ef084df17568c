"""A branch's condition, decided for a batch of instances at once.

Each kind reads what it needs once a batch: a contact condition is the segment rules'
SQL (delivery.segments) over the batch's contacts in one query; the last message's fate
is read from the messages, their clicks and the replies after them; a button is the
reply that ended the instance's last wait; an event property is in the instance.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import connection

from delivery.segments.services import segment_compile
from journeys.definition import (
    REPLY_EVENT,
    ButtonCondition,
    Condition,
    ContactCondition,
    LastMessageCondition,
    PropertyCondition,
    WindowCondition,
)
from journeys.work import Instance


def contacts_matching(rules: Any, contact_ids: Sequence[int]) -> set[int]:
    """The contacts of ``contact_ids`` the segment rules match."""
    if not contact_ids:
        return set()
    compiled = segment_compile(rules, prefix="b")
    sql = (
        "SELECT c.id FROM campaigns_contact AS c "  # noqa: S608 - the rules' SQL binds values
        f"WHERE c.id = ANY(%(branch_ids)s) AND ({compiled.condition})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {**compiled.params, "branch_ids": list(contact_ids)})
        return {int(row[0]) for row in cursor.fetchall()}


# Each message's fate: its status, a person's click on it, a reply by its contact after it.
_FATE_SQL = """
SELECT m.id, m.status,
       EXISTS (SELECT 1 FROM delivery_click k WHERE k.message_id = m.id AND NOT k.is_preview),
       EXISTS (SELECT 1 FROM journeys_contactevent e
                WHERE e.contact_id = m.contact_id AND e.name = %(reply)s
                  AND e.occurred_at >= coalesce(m.sent_at, m.created_at))
  FROM delivery_message AS m
 WHERE m.id = ANY(%(ids)s)
"""


def message_fates(message_ids: Sequence[int]) -> dict[int, tuple[str, bool, bool]]:
    """(status, clicked, replied) of each message."""
    if not message_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_FATE_SQL, {"ids": list(message_ids), "reply": REPLY_EVENT})
        return {int(i): (str(s), bool(c), bool(r)) for i, s, c, r in cursor.fetchall()}


def last_message_holds(outcome: str, fate: tuple[str, bool, bool] | None) -> bool:
    status, clicked, replied = fate if fate is not None else ("", False, False)
    sent = status in ("sent", "delivered", "read")
    delivered = status in ("delivered", "read")
    return {
        "sent": sent,
        "delivered": delivered,
        "read": status == "read",
        "clicked": clicked,
        "replied": replied,
        "failed": status in ("failed", "dead"),
        "not_sent": not sent and status not in ("pending", "sending", "unknown"),
        "not_delivered": not delivered,
        "not_read": status != "read",
    }[outcome]


def button_matches(condition: ButtonCondition, instance: Instance) -> bool:
    """The reply that ended the last wait was this button: its payload or its text."""
    wanted = condition.button.casefold().strip()
    said = [str(instance.resumed.get(k) or "") for k in ("button", "payload", "text")]
    return any(s.casefold().strip() == wanted for s in said if s)


def property_matches(condition: PropertyCondition, properties: dict[str, Any]) -> bool:
    present = condition.name in properties and properties[condition.name] is not None
    if condition.op == "exists":
        return present == (condition.value is not False)
    if not present:
        return condition.op == "ne"
    value = properties[condition.name]
    op, operand = condition.op, condition.value
    if op in ("gt", "gte", "lt", "lte"):
        left, right = _number(value), _number(operand)
        if left is None or right is None:
            return False
        return {"gt": left > right, "gte": left >= right, "lt": left < right, "lte": left <= right}[
            op
        ]
    if op == "in":
        return any(_equal(value, item) for item in operand or [])
    if op == "contains":
        if isinstance(value, list):
            return any(_equal(item, operand) for item in value)
        return str(operand).casefold() in str(value).casefold()
    equal = _equal(value, operand)
    return equal if op == "eq" else not equal


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


def _equal(left: Any, right: Any) -> bool:
    a, b = _number(left), _number(right)
    if a is not None and b is not None:
        return a == b
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    return bool(left == right)


class ConditionBatch:
    """Decides one branch step's condition for the instances that reach it in a round."""

    def __init__(
        self, condition: Condition, instances: Sequence[Instance], *, windows_open: set[int]
    ) -> None:
        self.condition = condition
        self.matching: set[int] = set()
        self.fates: dict[int, tuple[str, bool, bool]] = {}
        self.windows_open = windows_open
        if isinstance(condition, ContactCondition):
            self.matching = contacts_matching(condition.rules, [i.contact_id for i in instances])
        elif isinstance(condition, LastMessageCondition):
            self.fates = message_fates([i.last_message_id for i in instances if i.last_message_id])

    def holds(self, instance: Instance) -> bool:
        condition = self.condition
        if isinstance(condition, ContactCondition):
            return instance.contact_id in self.matching
        if isinstance(condition, PropertyCondition):
            return property_matches(condition, instance.properties)
        if isinstance(condition, LastMessageCondition):
            fate = self.fates.get(instance.last_message_id or 0)
            return last_message_holds(condition.outcome, fate)
        if isinstance(condition, ButtonCondition):
            return button_matches(condition, instance)
        if isinstance(condition, WindowCondition):
            return (instance.contact_id in self.windows_open) == condition.open
        raise AssertionError(condition)  # pragma: no cover


def condition_text(condition: Condition) -> str:
    """What a condition asks, for the history: ``last message read``."""
    if isinstance(condition, ContactCondition):
        return "the contact matches the rules"
    if isinstance(condition, PropertyCondition):
        return f"{condition.name} {condition.op} {condition.value!r}"
    if isinstance(condition, LastMessageCondition):
        return f"last message {condition.outcome.replace('_', ' ')}"
    if isinstance(condition, ButtonCondition):
        return f"tapped {condition.button!r}"
    return "window open" if condition.open else "window closed"
