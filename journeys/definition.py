"""A journey's definition: its JSON contract, read and checked before anything runs it.

One version of a journey is one JSON object (the admin's builder, ``manage.py journey``
and the docs write it)::

    {"entry": {"type": "event", "event": "cart_updated"},
     "key": "cart_id",
     "exits": [{"event": "checkout", "reason": "bought"}],
     "re_entry": "every_time",
     "window": "09:00-21:00", "time_zone": "America/Sao_Paulo",
     "steps": [
        {"id": "wait", "type": "wait", "delay": {"hours": 1}},
        {"id": "remind", "type": "send", "template": "cart_reminder",
         "mapping": {"body": {"1": {"field": "name"}},
                     "buttons": {"0": {"property": "cart_path"}}}},
        {"id": "reply", "type": "wait", "for_reply": true, "timeout": {"hours": 24},
         "on_reply": "replied"},
        {"id": "again", "type": "send", "template": "cart_reminder_2"},
        {"id": "done", "type": "exit", "reason": "reminded twice"},
        {"id": "replied", "type": "exit", "reason": "replied"}]}

Entries: ``event`` (an event in through the API), ``segment`` (those who newly fit a saved
segment, checked every ``every_minutes``), ``date`` (a date attribute, ``offset_days``
from it, at a local time of day; ``yearly`` for birthdays) and ``schedule`` (a recurring
campaign: a draft campaign launched as a run of its own on a schedule).

Steps run in order; ``next`` names another step ("end" ends the journey), and branches,
splits and waits name where each outcome goes. Steps: ``send`` (a template, optionally a
free-form text or buttons when the person's 24-hour window is open), ``wait`` (a delay,
until a local time of day, or for an event or a reply with a timeout), ``branch`` (on a
contact's fields, an event property, the last message's fate, a tapped button, the open
window), ``split`` (random, by percent), ``emit`` (an event out to subscriptions) and
``exit``. The steps form no cycle, so an instance passes each step at most once.

Every problem is named by its path (``steps[2].timeout``) and says what would be right;
``definition_parse`` reports all it finds at once. Checks against the database (the
template, the segment, the campaign exist and can be used) are ``journeys.versions``'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import time
from typing import Any

from campaigns.windows.daily import SendWindow
from campaigns.windows.zones import zone_valid
from delivery.events.types import custom_event_type_error
from whatsblast.core.frequency import frequency_cap_parse

STEP_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
EVENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
PROPERTY_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
END = "end"
# What a person writes to the number, as an event (journeys.whatsapp records it): a wait for
# a reply ends on it; it can be an exit or an entry too.
REPLY_EVENT = "whatsapp.reply"

MAX_STEPS = 50
MAX_EXITS = 20
MAX_WAIT_DAYS = 365
MAX_TIMEOUT_DAYS = 90
DEFAULT_LATENESS_HOURS = 24
MAX_LATENESS_HOURS = 24 * 30
MAX_TEXT = 1024  # Meta: a free-form text or an interactive body
MAX_BUTTON_TITLE = 20  # Meta: a reply button's title
MAX_BUTTON_ID = 256
MAX_BUTTONS = 3

ENTRY_TYPES = ("event", "segment", "date", "schedule")
STEP_TYPES = ("send", "wait", "branch", "split", "emit", "exit")
RE_ENTRY = ("every_time", "once")
PROPERTY_OPS = ("eq", "ne", "in", "contains", "exists", "gt", "gte", "lt", "lte")
# What happened to the instance's last message, for a branch.
LAST_MESSAGE_OUTCOMES = (
    "sent",
    "delivered",
    "read",
    "clicked",
    "replied",
    "failed",
    "not_sent",
    "not_delivered",
    "not_read",
)
SCHEDULE_EVERY = ("day", "week", "month")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class DefinitionError(ValueError):
    """A definition that cannot run: ``problems`` maps each path found wrong to what is
    wrong there, in the order found."""

    def __init__(self, problems: dict[str, str]) -> None:
        self.problems = dict(problems)
        super().__init__("; ".join(f"{at}: {what}" for at, what in self.problems.items()))


# --- what a definition holds ----------------------------------------------------------------


@dataclass(frozen=True)
class EventEntry:
    event: str
    type: str = "event"


@dataclass(frozen=True)
class SegmentEntry:
    segment_id: int
    every_minutes: int = 60
    # Enter those who already fit when the journey goes live; else only those who fit later.
    backfill: bool = False
    type: str = "segment"


@dataclass(frozen=True)
class DateEntry:
    field: str
    at: time
    offset_days: int = 0
    yearly: bool = False
    type: str = "date"


@dataclass(frozen=True)
class ScheduleEntry:
    campaign_id: int
    every: str
    at: time
    zone: str
    weekdays: tuple[int, ...] = ()
    day_of_month: int = 1
    # Each run leaves out the people an earlier run reached.
    only_new: bool = False
    type: str = "schedule"


Entry = EventEntry | SegmentEntry | DateEntry | ScheduleEntry


@dataclass(frozen=True)
class Exit:
    event: str
    reason: str


@dataclass(frozen=True)
class SendStep:
    id: str
    next: str
    template: str
    language: str = ""
    mapping: dict[str, Any] = field(default_factory=dict)
    # Where a tracked link ({"click": true} in the mapping) sends people.
    link: str = ""
    # When the person's 24-hour window is open: this free-form text instead of the
    # template, with up to three reply buttons ((id, title), an interactive message).
    window_text: str = ""
    window_buttons: tuple[tuple[str, str], ...] = ()
    type: str = "send"

    def targets(self) -> tuple[str, ...]:
        return (self.next,)


@dataclass(frozen=True)
class WaitStep:
    id: str
    next: str
    delay_s: int = 0
    until: time | None = None
    until_weekdays: tuple[int, ...] = ()
    event: str = ""
    reply: bool = False
    timeout_s: int = 0
    # Where a wait for an event or a reply goes when it comes (default: next) and when the
    # timeout passes first (default: next).
    on_event: str = ""
    on_timeout: str = ""
    type: str = "wait"

    @property
    def waits_for_something(self) -> bool:
        return bool(self.event) or self.reply

    def targets(self) -> tuple[str, ...]:
        if self.waits_for_something:
            return (self.on_event or self.next, self.on_timeout or self.next)
        return (self.next,)


@dataclass(frozen=True)
class ContactCondition:
    """The contact matches segment rules (delivery.segments.rules' contract)."""

    rules: Any
    kind: str = "contact"


@dataclass(frozen=True)
class PropertyCondition:
    """An event property the instance carries (the latest entry event's)."""

    name: str
    op: str
    value: Any = None
    kind: str = "property"


@dataclass(frozen=True)
class LastMessageCondition:
    outcome: str
    kind: str = "last_message"


@dataclass(frozen=True)
class ButtonCondition:
    """The reply that ended the last wait was this button (its payload or text, any case)."""

    button: str
    kind: str = "button"


@dataclass(frozen=True)
class WindowCondition:
    """The person's 24-hour customer-service window with the journey's number is open."""

    open: bool = True
    kind: str = "window_open"


Condition = (
    ContactCondition | PropertyCondition | LastMessageCondition | ButtonCondition | WindowCondition
)


@dataclass(frozen=True)
class BranchStep:
    id: str
    condition: Condition
    then: str
    otherwise: str
    type: str = "branch"

    def targets(self) -> tuple[str, ...]:
        return (self.then, self.otherwise)


@dataclass(frozen=True)
class SplitStep:
    id: str
    arms: tuple[tuple[int, str], ...]  # (percent, next)
    type: str = "split"

    def targets(self) -> tuple[str, ...]:
        return tuple(target for _, target in self.arms)


@dataclass(frozen=True)
class EmitStep:
    id: str
    next: str
    event_type: str
    type: str = "emit"

    def targets(self) -> tuple[str, ...]:
        return (self.next,)


@dataclass(frozen=True)
class ExitStep:
    id: str
    reason: str
    type: str = "exit"

    def targets(self) -> tuple[str, ...]:
        return ()


Step = SendStep | WaitStep | BranchStep | SplitStep | EmitStep | ExitStep


@dataclass(frozen=True)
class Definition:
    entry: Entry
    steps: tuple[Step, ...]
    exits: tuple[Exit, ...] = ()
    key: str = ""
    re_entry: str = "every_time"
    re_entry_days: int = 0
    window: SendWindow | None = None
    time_zone: str = ""
    time_zone_field: str = "timezone"
    holdout_percent: float = 0.0
    goal_event: str = ""
    goal_days: int = 7
    lateness_s: int = DEFAULT_LATENESS_HOURS * 3600
    frequency_cap: str = ""
    frequency_cap_defer: bool = False

    def step(self, step_id: str) -> Step | None:
        for step in self.steps:
            if step.id == step_id:
                return step
        return None

    @property
    def first(self) -> str:
        return self.steps[0].id if self.steps else END

    def step_ids(self) -> list[str]:
        return [s.id for s in self.steps]

    def send_steps(self) -> list[SendStep]:
        return [s for s in self.steps if isinstance(s, SendStep)]

    def exit_reasons(self, event: str) -> list[str]:
        return [e.reason for e in self.exits if e.event == event]

    @property
    def is_recurring(self) -> bool:
        return isinstance(self.entry, ScheduleEntry)


# --- reading ------------------------------------------------------------------------------


class _Problems:
    def __init__(self) -> None:
        self.found: dict[str, str] = {}

    def add(self, path: str, problem: str) -> None:
        self.found.setdefault(path, problem)


@dataclass(frozen=True)
class Parts:
    """What of a definition read, and what did not: the entry and the steps that did are
    still checked against the database (journeys.versions), so every problem is named at
    once, not one kind per attempt."""

    entry: Entry | None
    steps: tuple[Step, ...]
    problems: dict[str, str]


def definition_parts(data: object) -> Parts:
    """The entry and the steps of ``data`` that read, with every problem found."""
    return _read(data)[1]


def definition_parse(data: object) -> Definition:
    """The definition of ``data`` (parsed JSON), or ``DefinitionError`` with every problem."""
    definition, parts = _read(data)
    if definition is None:
        raise DefinitionError(parts.problems)
    return definition


def _read(data: object) -> tuple[Definition | None, Parts]:
    problems = _Problems()
    if not isinstance(data, dict):
        return None, Parts(None, (), {"definition": "a journey is a JSON object"})
    allowed = {
        "entry", "steps", "exits", "key", "re_entry", "window", "time_zone",
        "time_zone_field", "holdout_percent", "goal", "lateness_hours", "frequency_cap",
        "frequency_cap_defer",
    }  # fmt: skip
    for key in sorted(set(data) - allowed, key=str):
        problems.add(str(key), f"unknown setting; the settings are {', '.join(sorted(allowed))}")
    entry = _entry(data.get("entry"), problems)
    steps = _steps(data.get("steps"), entry, problems)
    exits = _exits(data.get("exits", []), problems)
    key = _key(data.get("key", ""), entry, problems)
    re_entry, re_entry_days = _re_entry(data.get("re_entry", "every_time"), problems)
    window = _window(data.get("window"), problems)
    zone = _zone(data.get("time_zone", ""), "time_zone", problems)
    zone_field = data.get("time_zone_field", "timezone")
    if not isinstance(zone_field, str) or len(zone_field) > 100:
        problems.add("time_zone_field", "a contact field's name (up to 100 characters)")
        zone_field = "timezone"
    holdout = _number(data.get("holdout_percent", 0), "holdout_percent", 0, 50, problems)
    goal_event, goal_days = _goal(data.get("goal"), problems)
    lateness_hours = _number(
        data.get("lateness_hours", DEFAULT_LATENESS_HOURS),
        "lateness_hours",
        0.0167,
        MAX_LATENESS_HOURS,
        problems,
    )
    cap = data.get("frequency_cap", "")
    if not isinstance(cap, str):
        problems.add("frequency_cap", 'a cap such as "2/7d", "off", or "" for the site\'s')
        cap = ""
    else:
        try:
            frequency_cap_parse(cap)
        except ValueError as exc:
            problems.add("frequency_cap", str(exc))
    defer = data.get("frequency_cap_defer", False)
    if not isinstance(defer, bool):
        problems.add("frequency_cap_defer", "true or false")
        defer = False
    if isinstance(entry, ScheduleEntry):
        if steps:
            problems.add(
                "steps",
                "a recurring campaign has no steps: each run is its campaign, launched whole",
            )
        for name in ("key", "exits"):
            if data.get(name):
                problems.add(name, "not for a recurring campaign")
    elif entry is not None and not steps and "steps" not in problems.found:
        problems.add("steps", "a journey needs at least one step")
    if problems.found:
        return None, Parts(entry, tuple(steps), problems.found)
    assert entry is not None
    definition = Definition(
        entry=entry,
        steps=tuple(steps),
        exits=tuple(exits),
        key=key,
        re_entry=re_entry,
        re_entry_days=re_entry_days,
        window=window,
        time_zone=zone,
        time_zone_field=zone_field,
        holdout_percent=float(holdout),
        goal_event=goal_event,
        goal_days=goal_days,
        lateness_s=round(float(lateness_hours) * 3600),
        frequency_cap=cap.strip(),
        frequency_cap_defer=defer,
    )
    return definition, Parts(entry, definition.steps, {})


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", str: "a string", list: "a list", dict: "an object"}.get(
        type(value), "a number"
    )


def _only(data: dict[str, Any], allowed: set[str], path: str, problems: _Problems) -> None:
    for key in sorted(set(data) - allowed, key=str):
        problems.add(f"{path}.{key}", f"unknown here; this takes {', '.join(sorted(allowed))}")


def _text(value: object, path: str, problems: _Problems, *, max_length: int = 200) -> str:
    if not isinstance(value, str) or not value.strip():
        problems.add(path, "a non-blank text")
        return ""
    if len(value) > max_length:
        problems.add(path, f"at most {max_length} characters")
    return value.strip()


def _int(value: object, path: str, lo: int, hi: int, problems: _Problems) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        problems.add(path, f"a whole number from {lo} to {hi}")
        return lo
    return value


def _number(value: object, path: str, lo: float, hi: float, problems: _Problems) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        problems.add(path, f"a number from {lo:g} to {hi:g}")
        return lo
    return float(value)


def _event_name(value: object, path: str, problems: _Problems) -> str:
    if not isinstance(value, str) or not EVENT_NAME.match(value):
        problems.add(
            path, "an event name: letters, digits and _ . : - (up to 100), as the API sends it"
        )
        return ""
    return value


def _time_of_day(value: object, path: str, problems: _Problems) -> time:
    if isinstance(value, str):
        match = re.match(r"^(\d{1,2}):(\d{2})$", value.strip())
        if match and int(match[1]) < 24 and int(match[2]) < 60:
            return time(int(match[1]), int(match[2]))
    problems.add(path, 'a local time of day, "HH:MM" (24-hour)')
    return time(0, 0)


def _weekdays(value: object, path: str, problems: _Problems) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not all(v in WEEKDAYS for v in value):
        problems.add(path, f"a non-empty list of {', '.join(WEEKDAYS)}")
        return ()
    return tuple(sorted({WEEKDAYS.index(v) for v in value}))


def _duration(value: object, path: str, max_days: int, problems: _Problems) -> int:
    """``{"days": D, "hours": H, "minutes": M}`` (any of them) as seconds."""
    if not isinstance(value, dict) or not value or set(value) - {"days", "hours", "minutes"}:
        problems.add(path, 'a duration: {"days": D, "hours": H, "minutes": M}, any of them')
        return 0
    total = 0.0
    for unit, seconds in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        amount = value.get(unit, 0)
        if isinstance(amount, bool) or not isinstance(amount, int | float) or amount < 0:
            problems.add(f"{path}.{unit}", "a number of zero or more")
            return 0
        total += float(amount) * seconds
    if not 60 <= total <= max_days * 86400:
        problems.add(path, f"from one minute to {max_days} days")
        return 0
    return round(total)


def _zone(value: object, path: str, problems: _Problems) -> str:
    if value in ("", None):
        return ""
    zone = zone_valid(value)
    if zone is None:
        problems.add(path, "an IANA time zone such as America/Sao_Paulo")
        return ""
    return zone


def _window(value: object, problems: _Problems) -> SendWindow | None:
    if value in (None, ""):
        return None
    if isinstance(value, str):
        try:
            return SendWindow.parse(value)
        except ValueError as exc:
            problems.add("window", str(exc))
            return None
    problems.add("window", 'a daily send window such as "09:00-21:00", or null for any time')
    return None


def _goal(value: object, problems: _Problems) -> tuple[str, int]:
    if value in (None, {}):
        return "", 7
    if not isinstance(value, dict):
        problems.add("goal", '{"event": NAME, "within_days": N}: what counts as converted')
        return "", 7
    _only(value, {"event", "within_days"}, "goal", problems)
    event = _event_name(value.get("event"), "goal.event", problems)
    days = _int(value.get("within_days", 7), "goal.within_days", 1, 90, problems)
    return event, days


def _key(value: object, entry: Entry | None, problems: _Problems) -> str:
    if value in ("", None):
        return ""
    if not isinstance(value, str) or not PROPERTY_NAME.match(value):
        problems.add("key", "an event property's name, such as cart_id")
        return ""
    if entry is not None and not isinstance(entry, EventEntry):
        problems.add("key", "only a journey entered by an event is keyed by one of its properties")
    return value


def _re_entry(value: object, problems: _Problems) -> tuple[str, int]:
    if value in RE_ENTRY:
        return str(value), 0
    if isinstance(value, dict) and set(value) == {"after_days"}:
        return "after_days", _int(value["after_days"], "re_entry.after_days", 1, 3650, problems)
    problems.add("re_entry", '"every_time", "once", or {"after_days": N}')
    return "every_time", 0


def _exits(value: object, problems: _Problems) -> list[Exit]:
    if not isinstance(value, list) or len(value) > MAX_EXITS:
        problems.add("exits", f'a list of up to {MAX_EXITS} {{"event": NAME, "reason": TEXT}}')
        return []
    exits = []
    for index, item in enumerate(value):
        path = f"exits[{index}]"
        if not isinstance(item, dict):
            problems.add(path, '{"event": NAME, "reason": TEXT}')
            continue
        _only(item, {"event", "reason"}, path, problems)
        event = _event_name(item.get("event"), f"{path}.event", problems)
        reason = item.get("reason", event)
        reason = _text(reason, f"{path}.reason", problems, max_length=100)
        exits.append(Exit(event, reason))
    return exits


def _entry(value: object, problems: _Problems) -> Entry | None:
    if not isinstance(value, dict):
        problems.add("entry", f"how people enter: an object whose type is one of {ENTRY_TYPES}")
        return None
    kind = value.get("type")
    if kind == "event":
        _only(value, {"type", "event"}, "entry", problems)
        return EventEntry(_event_name(value.get("event"), "entry.event", problems))
    if kind == "segment":
        _only(value, {"type", "segment", "every_minutes", "backfill"}, "entry", problems)
        segment = _int(value.get("segment"), "entry.segment", 1, 2**62, problems)
        every = _int(
            value.get("every_minutes", 60), "entry.every_minutes", 1, 7 * 24 * 60, problems
        )
        backfill = value.get("backfill", False)
        if not isinstance(backfill, bool):
            problems.add("entry.backfill", "true or false")
            backfill = False
        return SegmentEntry(segment, every, backfill)
    if kind == "date":
        _only(value, {"type", "field", "offset_days", "at", "yearly"}, "entry", problems)
        name = _text(value.get("field"), "entry.field", problems, max_length=100)
        offset = _int(value.get("offset_days", 0), "entry.offset_days", -366, 3660, problems)
        at = _time_of_day(value.get("at"), "entry.at", problems)
        yearly = value.get("yearly", False)
        if not isinstance(yearly, bool):
            problems.add("entry.yearly", "true or false")
            yearly = False
        return DateEntry(name, at, offset, yearly)
    if kind == "schedule":
        return _schedule(value, problems)
    problems.add("entry.type", f"one of {', '.join(ENTRY_TYPES)}")
    return None


def _schedule(value: dict[str, Any], problems: _Problems) -> ScheduleEntry:
    allowed = {"type", "campaign", "every", "weekdays", "day_of_month", "at", "zone", "only_new"}
    _only(value, allowed, "entry", problems)
    campaign = _int(value.get("campaign"), "entry.campaign", 1, 2**62, problems)
    every = value.get("every")
    if every not in SCHEDULE_EVERY:
        problems.add("entry.every", f"one of {', '.join(SCHEDULE_EVERY)}")
        every = "day"
    weekdays: tuple[int, ...] = ()
    if every == "week":
        weekdays = _weekdays(value.get("weekdays"), "entry.weekdays", problems)
        if not weekdays and "entry.weekdays" not in problems.found:
            problems.add("entry.weekdays", 'the days of the week it runs, e.g. ["mon"]')
    elif "weekdays" in value:
        problems.add("entry.weekdays", 'only for "every": "week"')
    day = 1
    if every == "month":
        day = _int(value.get("day_of_month", 1), "entry.day_of_month", 1, 28, problems)
    elif "day_of_month" in value:
        problems.add("entry.day_of_month", 'only for "every": "month"')
    at = _time_of_day(value.get("at"), "entry.at", problems)
    zone = _zone(value.get("zone", ""), "entry.zone", problems) or "UTC"
    only_new = value.get("only_new", False)
    if not isinstance(only_new, bool):
        problems.add("entry.only_new", "true or false")
        only_new = False
    return ScheduleEntry(campaign, str(every), at, zone, weekdays, day, only_new)


def _steps(value: object, entry: Entry | None, problems: _Problems) -> list[Step]:
    if value is None:
        value = []
    if not isinstance(value, list) or len(value) > MAX_STEPS:
        problems.add("steps", f"a list of up to {MAX_STEPS} steps")
        return []
    steps: list[Step] = []
    ids: list[str] = []
    for index, item in enumerate(value):
        path = f"steps[{index}]"
        if not isinstance(item, dict):
            problems.add(path, "a step is an object with an id and a type")
            continue
        step_id = item.get("id")
        if not isinstance(step_id, str) or not STEP_ID.match(step_id) or step_id == END:
            problems.add(f"{path}.id", 'a short name: a-z, 0-9, _ and - (up to 40), not "end"')
            step_id = f"#{index}"
        elif step_id in ids:
            problems.add(f"{path}.id", f"{step_id!r} is taken by an earlier step")
        ids.append(step_id)
        following = ""
        if index + 1 < len(value) and isinstance(value[index + 1], dict):
            following = str(value[index + 1].get("id") or "")
        step = _step(item, step_id, following or END, path, problems)
        if step is not None:
            steps.append(step)
    _graph_check(steps, {step_id: i for i, step_id in enumerate(ids)}, problems)
    return steps


def _next(item: dict[str, Any], key: str, default: str, path: str, problems: _Problems) -> str:
    value = item.get(key, default)
    if not isinstance(value, str) or not value:
        problems.add(f"{path}.{key}", 'a step\'s id, or "end"')
        return default
    return value


def _step(
    item: dict[str, Any], step_id: str, following: str, path: str, problems: _Problems
) -> Step | None:  # noqa: E501
    kind = item.get("type")
    if kind == "send":
        return _send(item, step_id, following, path, problems)
    if kind == "wait":
        return _wait(item, step_id, following, path, problems)
    if kind == "branch":
        _only(item, {"id", "type", "if", "then", "else"}, path, problems)
        condition = _condition(item.get("if"), f"{path}.if", problems)
        then = _next(item, "then", following, path, problems)
        otherwise = _next(item, "else", following, path, problems)
        return BranchStep(step_id, condition, then, otherwise) if condition else None
    if kind == "split":
        _only(item, {"id", "type", "arms"}, path, problems)
        return _split(item.get("arms"), step_id, path, problems)
    if kind == "emit":
        _only(item, {"id", "type", "event", "next"}, path, problems)
        event_type = item.get("event")
        why = custom_event_type_error(event_type) if isinstance(event_type, str) else "a text"
        if why:
            problems.add(f"{path}.event", why)
            event_type = ""
        return EmitStep(step_id, _next(item, "next", following, path, problems), str(event_type))
    if kind == "exit":
        _only(item, {"id", "type", "reason"}, path, problems)
        reason = _text(item.get("reason", "exited"), f"{path}.reason", problems, max_length=100)
        return ExitStep(step_id, reason)
    problems.add(f"{path}.type", f"one of {', '.join(STEP_TYPES)}")
    return None


def _send(
    item: dict[str, Any], step_id: str, following: str, path: str, problems: _Problems
) -> SendStep:  # noqa: E501
    _only(
        item,
        {"id", "type", "template", "language", "mapping", "link", "next", "if_window_open"},
        path,
        problems,
    )
    template = _text(item.get("template"), f"{path}.template", problems, max_length=512)
    language = item.get("language", "")
    if not isinstance(language, str) or len(language) > 16:
        problems.add(f"{path}.language", "a template language code such as pt_BR")
        language = ""
    mapping = item.get("mapping", {})
    if not isinstance(mapping, dict):
        problems.add(f"{path}.mapping", "the template's parameter mapping, an object")
        mapping = {}
    link = item.get("link", "")
    if not isinstance(link, str) or len(link) > 2000:
        problems.add(f"{path}.link", "where a tracked link sends people: a URL")
        link = ""
    text: str = ""
    buttons: tuple[tuple[str, str], ...] = ()
    if "if_window_open" in item:
        text, buttons = _window_message(item["if_window_open"], f"{path}.if_window_open", problems)
    return SendStep(
        step_id,
        _next(item, "next", following, path, problems),
        template,
        language.strip(),
        mapping,
        link.strip(),
        text,
        buttons,
    )


def _window_message(
    value: object, path: str, problems: _Problems
) -> tuple[str, tuple[tuple[str, str], ...]]:  # noqa: E501
    """``{"text": TEXT}`` or ``{"text": TEXT, "buttons": [{"id": ID, "title": TITLE}]}``."""
    if not isinstance(value, dict):
        problems.add(path, '{"text": TEXT, "buttons": [{"id": ID, "title": TITLE}, ...]}')
        return "", ()
    _only(value, {"text", "buttons"}, path, problems)
    text = _text(value.get("text"), f"{path}.text", problems, max_length=MAX_TEXT)
    buttons = value.get("buttons", [])
    if not isinstance(buttons, list) or len(buttons) > MAX_BUTTONS:
        problems.add(f"{path}.buttons", f"up to {MAX_BUTTONS} reply buttons")
        return text, ()
    parsed = []
    for index, button in enumerate(buttons):
        where = f"{path}.buttons[{index}]"
        if not isinstance(button, dict) or set(button) - {"id", "title"}:
            problems.add(where, '{"id": ID, "title": TITLE}')
            continue
        title = _text(button.get("title"), f"{where}.title", problems, max_length=MAX_BUTTON_TITLE)
        button_id = button.get("id", title)
        button_id = _text(button_id, f"{where}.id", problems, max_length=MAX_BUTTON_ID)
        parsed.append((button_id, title))
    if len({b for b, _ in parsed}) < len(parsed):
        problems.add(f"{path}.buttons", "each button needs an id of its own")
    return text, tuple(parsed)


def _wait(
    item: dict[str, Any], step_id: str, following: str, path: str, problems: _Problems
) -> WaitStep:  # noqa: E501
    allowed = {
        "id", "type", "delay", "until", "weekdays", "for_event", "for_reply", "timeout",
        "on_event", "on_reply", "on_timeout", "next",
    }  # fmt: skip
    _only(item, allowed, path, problems)
    kinds = [k for k in ("delay", "until", "for_event", "for_reply") if item.get(k)]
    if len(kinds) != 1:
        problems.add(path, "a wait has one of delay, until, for_event or for_reply")
        return WaitStep(step_id, following)
    nxt = _next(item, "next", following, path, problems)
    kind = kinds[0]
    if kind == "delay":
        delay = _duration(item["delay"], f"{path}.delay", MAX_WAIT_DAYS, problems)
        for extra in ("timeout", "on_event", "on_reply", "on_timeout", "weekdays"):
            if extra in item:
                problems.add(f"{path}.{extra}", "only for a wait for an event or a reply")
        return WaitStep(step_id, nxt, delay_s=delay)
    if kind == "until":
        at = _time_of_day(item["until"], f"{path}.until", problems)
        days = _weekdays(item.get("weekdays"), f"{path}.weekdays", problems)
        return WaitStep(step_id, nxt, until=at, until_weekdays=days)
    if "timeout" not in item:
        problems.add(f"{path}.timeout", "how long to wait at most (nobody waits for ever)")
        timeout = 0
    else:
        timeout = _duration(item["timeout"], f"{path}.timeout", MAX_TIMEOUT_DAYS, problems)
    on_timeout = _next(item, "on_timeout", nxt, path, problems)
    if kind == "for_event":
        event = _event_name(item["for_event"], f"{path}.for_event", problems)
        if "on_reply" in item:
            problems.add(f"{path}.on_reply", "only for a wait for a reply")
        on_event = _next(item, "on_event", nxt, path, problems)
        return WaitStep(
            step_id, nxt, event=event, timeout_s=timeout, on_event=on_event, on_timeout=on_timeout
        )
    if item["for_reply"] is not True:
        problems.add(f"{path}.for_reply", "true")
    if "on_event" in item:
        problems.add(f"{path}.on_event", "only for a wait for an event")
    on_reply = _next(item, "on_reply", nxt, path, problems)
    return WaitStep(
        step_id, nxt, reply=True, timeout_s=timeout, on_event=on_reply, on_timeout=on_timeout
    )


def _condition(value: object, path: str, problems: _Problems) -> Condition | None:
    if not isinstance(value, dict) or len(value) != 1 and "property" not in value:
        problems.add(
            path,
            "one of {contact: RULES}, {property: NAME, op: OP, value: V}, {last_message: "
            "OUTCOME}, {button: TEXT}, {window_open: true|false}",
        )
        return None
    if "contact" in value:
        return ContactCondition(value["contact"])
    if "property" in value:
        _only(value, {"property", "op", "value"}, path, problems)
        name = value["property"]
        if not isinstance(name, str) or not PROPERTY_NAME.match(name):
            problems.add(f"{path}.property", "an event property's name")
        op = value.get("op", "eq")
        if op not in PROPERTY_OPS:
            problems.add(f"{path}.op", f"one of {', '.join(PROPERTY_OPS)}")
        operand = value.get("value")
        if op == "in" and not isinstance(operand, list):
            problems.add(f"{path}.value", "a list for op in")
        elif op in ("gt", "gte", "lt", "lte") and (
            isinstance(operand, bool) or not isinstance(operand, int | float)
        ):
            problems.add(f"{path}.value", f"a number for op {op}")
        elif op not in ("in", "exists") and not isinstance(operand, str | int | float | bool):
            problems.add(f"{path}.value", "a text, a number or a boolean")
        return PropertyCondition(str(name), str(op), operand)
    if "last_message" in value:
        outcome = value["last_message"]
        if outcome not in LAST_MESSAGE_OUTCOMES:
            problems.add(f"{path}.last_message", f"one of {', '.join(LAST_MESSAGE_OUTCOMES)}")
        return LastMessageCondition(str(outcome))
    if "button" in value:
        return ButtonCondition(_text(value["button"], f"{path}.button", problems, max_length=256))
    if "window_open" in value:
        if not isinstance(value["window_open"], bool):
            problems.add(f"{path}.window_open", "true or false")
        return WindowCondition(bool(value["window_open"]))
    problems.add(path, "one of contact, property, last_message, button, window_open")
    return None


def _split(value: object, step_id: str, path: str, problems: _Problems) -> SplitStep | None:
    if not isinstance(value, list) or not 2 <= len(value) <= 10:
        problems.add(f"{path}.arms", '2 to 10 arms, each {"percent": P, "next": STEP}')
        return None
    arms = []
    for index, arm in enumerate(value):
        where = f"{path}.arms[{index}]"
        if not isinstance(arm, dict) or set(arm) != {"percent", "next"}:
            problems.add(where, '{"percent": P, "next": STEP}')
            continue
        percent = _int(arm["percent"], f"{where}.percent", 1, 99, problems)
        arms.append((percent, _next(arm, "next", END, where, problems)))
    if arms and sum(p for p, _ in arms) != 100:
        problems.add(f"{path}.arms", "the arms' percents add up to 100")
    return SplitStep(step_id, tuple(arms))


def _graph_check(steps: list[Step], index: dict[str, int], problems: _Problems) -> None:
    """Every target exists; no cycle (each step is passed at most once); every step is
    reached from the first. ``index`` is each step's position as written: a step that did
    not read (its own problem named) still counts as a target, so one mistake is not
    reported twice. The rest is checked once every step read (positions then agree)."""
    for step in steps:
        for target in step.targets():
            if target != END and target not in index:
                problems.add(
                    f"steps[{index[step.id]}]", f"goes to {target!r}, which is no step's id"
                )  # noqa: E501
    if problems.found:
        return
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(step_id: str, trail: list[str]) -> None:
        if step_id == END or state.get(step_id) == 2:
            return
        if state.get(step_id) == 1:
            loop = " → ".join([*trail[trail.index(step_id) :], step_id])
            problems.add(f"steps[{index[step_id]}]", f"a loop: {loop}; a step is passed once")
            return
        state[step_id] = 1
        step = steps[index[step_id]]
        for target in step.targets():
            visit(target, [*trail, step_id])
        state[step_id] = 2

    if steps:
        visit(steps[0].id, [])
    for position, step in enumerate(steps):
        if step.id not in state:
            problems.add(f"steps[{position}]", f"{step.id!r} is never reached from the first step")


def definition_json(data: object) -> dict[str, Any]:
    """``data`` after ``definition_parse`` accepted it, as stored (a plain JSON object)."""
    definition_parse(data)
    assert isinstance(data, dict)
    return data
