"""A segment's rules, read from their JSON and checked, before any SQL is built.

The contract (scripts, the CLI and the admin write it)::

    {"all": [{"field": "city", "op": "eq", "value": "São Paulo"},
             {"not": {"list": "staff"}},
             {"campaign": 12, "outcome": "delivered_not_read"}]}

* ``all`` / ``any`` take a non-empty list of rules, ``not`` one rule;
* ``{"field": F, "op": OP, "value": V}``: a contact field (``phone``, ``name``,
  ``country``, ``created``, ``opted_in``) or, for any other name, the uploaded attribute of
  that name; the name is data, never SQL;
* ``{"list": NAME}``: a member of that contact list;
* ``{"campaign": ID, "outcome": OUTCOME}``: what the contact's message in that campaign came
  to (``OUTCOMES``); ``{"campaign": ID, "outcome": "tapped", "button": TEXT}``: tapped that
  quick reply (its text, case-insensitive), the only outcome that takes a ``button``;
* ``{"marketing_within_days": N}``: sent a marketing template in the last N days.

Every error names the rule by its path (``rules.all[2].not``) and says what would be right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

# The contact's own fields; any other name is an uploaded attribute.
CONTACT_FIELDS = ("phone", "name", "country", "created", "opted_in")
DATE_FIELDS = ("created", "opted_in")

TEXT_OPS = ("eq", "ne", "in", "contains", "starts_with", "exists")
ORDER_OPS = ("gt", "gte", "lt", "lte")
OPS = TEXT_OPS + ORDER_OPS
# What each contact field accepts (an attribute accepts every operator).
FIELD_OPS: dict[str, tuple[str, ...]] = {
    "phone": ("eq", "ne", "in", "starts_with", "exists"),
    "name": ("eq", "ne", "in", "contains", "starts_with", "exists"),
    "country": ("eq", "ne", "in"),
    "created": ("eq", "gt", "gte", "lt", "lte"),
    "opted_in": ("eq", "gt", "gte", "lt", "lte", "exists"),
}

# What a contact's message in a campaign came to.
OUTCOMES = (
    "not_sent",  # never went out: skipped (opted out, capped, ...), cancelled or still pending
    "sent",  # accepted by Meta (whatever came after)
    "failed",  # failed or dead-lettered
    "delivered",  # reached the phone (read included)
    "delivered_not_read",
    "read",
    "replied",  # wrote back to the campaign
    "opted_out",  # opted out after the campaign's message
    "tapped",  # tapped the quick reply named by "button"
    "clicked",  # a person (not a link-preview fetcher) clicked its tracked link
    "delivered_not_clicked",  # delivered (read included), no person's click
    "converted",  # a conversion attributed to the campaign
)
# The outcome that names a button, and the longest text a quick-reply button may carry
# (Meta: 25 characters; a payload-less tap returns the text).
BUTTON_OUTCOME = "tapped"
MAX_BUTTON_TEXT = 200

MAX_DEPTH = 8
MAX_RULES = 100
MAX_DAYS = 3660

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_REGION = re.compile(r"^[A-Z]{2}$")


class RuleError(ValueError):
    """Rules that cannot be used, each named by its path: ``problems`` maps every path found
    wrong to what is wrong there; ``path`` and ``problem`` are the first of them."""

    def __init__(self, path: str, problem: str, *, more: dict[str, str] | None = None) -> None:
        self.problems = {path: problem, **(more or {})}
        super().__init__("; ".join(f"{at}: {what}" for at, what in self.problems.items()))
        self.path = path
        self.problem = problem

    @classmethod
    def of(cls, errors: list[RuleError]) -> RuleError:
        """One error for all of ``errors`` (at least one), in their order."""
        problems = {at: what for error in errors for at, what in error.problems.items()}
        first, *rest = problems.items()
        return cls(*first, more=dict(rest))


class _RulesTooMany(RuleError):
    """Past ``MAX_RULES``: reading stops there."""


@dataclass(frozen=True)
class AllOf:
    rules: tuple[Rule, ...]


@dataclass(frozen=True)
class AnyOf:
    rules: tuple[Rule, ...]


@dataclass(frozen=True)
class Not:
    rule: Rule


@dataclass(frozen=True)
class FieldRule:
    field: str
    op: str
    value: Any  # str | Decimal | date | bool | tuple[str, ...]; checked for the op

    @property
    def is_attribute(self) -> bool:
        return self.field not in CONTACT_FIELDS


@dataclass(frozen=True)
class InList:
    list_name: str


@dataclass(frozen=True)
class CampaignOutcome:
    campaign_id: int
    outcome: str
    button: str = ""  # "tapped": the quick reply's text


@dataclass(frozen=True)
class MarketingWithin:
    days: int


Rule = AllOf | AnyOf | Not | FieldRule | InList | CampaignOutcome | MarketingWithin


def rules_parse(data: object, path: str = "rules") -> Rule:
    """The rule tree of ``data`` (the parsed JSON), or ``RuleError`` naming what is wrong."""
    counter = [0]
    return _parse(data, path, 0, counter)


def _parse(data: object, path: str, depth: int, counter: list[int]) -> Rule:
    counter[0] += 1
    if counter[0] > MAX_RULES:
        raise _RulesTooMany(path, f"more than {MAX_RULES} rules in one segment")
    if depth > MAX_DEPTH:
        raise RuleError(path, f"groups nest more than {MAX_DEPTH} deep")
    if not isinstance(data, dict):
        raise RuleError(path, f"a rule is a JSON object, not {_kind(data)}")
    keys = set(data)
    for group in ("all", "any"):
        if group in keys:
            _only(keys, {group}, path)
            items = data[group]
            if not isinstance(items, list) or not items:
                raise RuleError(f"{path}.{group}", "takes a non-empty list of rules")
            # Every rule of the group is read, so a request learns of all its bad rules at
            # once, not one per attempt.
            rules: list[Rule] = []
            errors: list[RuleError] = []
            for i, item in enumerate(items):
                try:
                    rules.append(_parse(item, f"{path}.{group}[{i}]", depth + 1, counter))
                except _RulesTooMany:
                    raise  # every rule after it would say the same
                except RuleError as exc:
                    errors.append(exc)
            if errors:
                raise RuleError.of(errors)
            return AllOf(tuple(rules)) if group == "all" else AnyOf(tuple(rules))
    if "not" in keys:
        _only(keys, {"not"}, path)
        return Not(_parse(data["not"], f"{path}.not", depth + 1, counter))
    if "field" in keys:
        _only(keys, {"field", "op", "value"}, path)
        return _field_rule(data, path)
    if "list" in keys:
        _only(keys, {"list"}, path)
        name = data["list"]
        if not isinstance(name, str) or not name.strip():
            raise RuleError(f"{path}.list", "names a contact list by its name")
        return InList(name.strip())
    if "campaign" in keys:
        _only(keys, {"campaign", "outcome", "button"}, path)
        return _campaign_outcome(data, path)
    if "marketing_within_days" in keys:
        _only(keys, {"marketing_within_days"}, path)
        days = data["marketing_within_days"]
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
            raise RuleError(
                f"{path}.marketing_within_days", f"is a whole number of days, 1 to {MAX_DAYS}"
            )
        return MarketingWithin(days)
    raise RuleError(
        path,
        "is a group (all, any, not) or a rule on a field, a list, a campaign's outcome or "
        "marketing_within_days",
    )


def _campaign_outcome(data: dict[str, Any], path: str) -> CampaignOutcome:
    campaign = data["campaign"]
    if isinstance(campaign, bool) or not isinstance(campaign, int) or campaign <= 0:
        raise RuleError(f"{path}.campaign", "is a campaign's id (a positive whole number)")
    outcome = data.get("outcome")
    if outcome not in OUTCOMES:
        raise RuleError(f"{path}.outcome", f"is one of {', '.join(OUTCOMES)}")
    if outcome != BUTTON_OUTCOME:
        if "button" in data:
            raise RuleError(f"{path}.button", f"is only for the outcome {BUTTON_OUTCOME!r}")
        return CampaignOutcome(campaign, str(outcome))
    button = data.get("button")
    if not isinstance(button, str) or not button.strip():
        raise RuleError(f"{path}.button", "names the quick reply tapped, by its text")
    if len(button.strip()) > MAX_BUTTON_TEXT:
        raise RuleError(f"{path}.button", f"is a button's text, at most {MAX_BUTTON_TEXT} long")
    return CampaignOutcome(campaign, BUTTON_OUTCOME, button.strip())


def _field_rule(data: dict[str, Any], path: str) -> FieldRule:
    field = data["field"]
    if not isinstance(field, str) or not field.strip():
        raise RuleError(f"{path}.field", "names a contact field or an uploaded attribute")
    field = field.strip()
    op = data.get("op")
    allowed = FIELD_OPS.get(field, OPS)
    if op not in allowed:
        raise RuleError(
            f"{path}.op", f"{op!r} does not apply to {field!r}: use one of {', '.join(allowed)}"
        )
    if "value" not in data:
        raise RuleError(f"{path}.value", "is missing")
    return FieldRule(field, str(op), _value(field, str(op), data["value"], f"{path}.value"))


def _value(field: str, op: str, value: object, path: str) -> Any:
    if op == "exists":
        if not isinstance(value, bool):
            raise RuleError(path, "is true (has a value) or false (has none)")
        return value
    if op == "in":
        if not isinstance(value, list) or not value:
            raise RuleError(path, "is a non-empty list of values for 'in'")
        return tuple(_scalar(field, item, f"{path}[{i}]") for i, item in enumerate(value))
    if field in DATE_FIELDS:
        return _date(value, path)
    if op in ORDER_OPS:
        return _comparable(value, path)
    if op in ("contains", "starts_with") and not isinstance(value, str | int | float):
        raise RuleError(path, f"is text to look for, not {_kind(value)}")
    return _scalar(field, value, path)


def _scalar(field: str, value: object, path: str) -> str:
    if field == "country":
        if not isinstance(value, str) or not _REGION.match(value.strip().upper()):
            raise RuleError(path, "is a two-letter country code (BR, US, CA)")
        return value.strip().upper()
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RuleError(path, f"is text or a number, not {_kind(value)}")
    return value if isinstance(value, str) else _number_text(value)


def _number_text(value: int | float) -> str:
    """A number as an uploaded attribute holds it: 3, not 3.0."""
    return str(int(value)) if float(value).is_integer() else str(value)


def _comparable(value: object, path: str) -> Decimal | date:
    """A number or an ISO date: the two kinds of value an order applies to."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Decimal(str(value))
    if isinstance(value, str):
        text = value.strip()
        if _ISO_DATE.match(text):
            return _date(text, path)
        try:
            number = Decimal(text)
        except InvalidOperation:
            pass
        else:
            if number.is_finite():
                return number
    raise RuleError(path, f"{value!r} cannot compare: give a number or a date (YYYY-MM-DD)")


def _date(value: object, path: str) -> date:
    if isinstance(value, str) and _ISO_DATE.match(value.strip()):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise RuleError(path, f"{value!r} is not a date: give YYYY-MM-DD")


def _only(keys: set[str], allowed: set[str], path: str) -> None:
    extra = sorted(keys - allowed)
    if extra:
        raise RuleError(path, f"unexpected {', '.join(map(repr, extra))} beside {sorted(allowed)}")


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false"}.get(
        type(value), "null" if value is None else "a number"
    )
