"""A journey in words, for the journey pages: how people enter, what each step does.

``entry_text`` is the list's "entry" column ("event cart_updated", "segment VIP newly",
"birthday at 10:00 local", "every Monday 10:00 America/Sao_Paulo"); ``step_text`` the
steps table's "what it does". Pure functions of a parsed definition (journeys.definition)
and the names the caller read (segments, campaigns), so a list page names every row's
entry without a query per row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from journeys.conditions import condition_text
from journeys.definition import (
    END,
    WEEKDAYS,
    BranchStep,
    DateEntry,
    Definition,
    EmitStep,
    Entry,
    EventEntry,
    ExitStep,
    ScheduleEntry,
    SegmentEntry,
    SendStep,
    SplitStep,
    Step,
    WaitStep,
)
from journeys.timing import duration_text

DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
DAY_SHORT = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
RE_ENTRY_TEXT = {"every_time": "every time", "once": "once only"}


def weekday_code(index: int) -> str:
    """``0`` → ``"mon"`` (the definition's spelling)."""
    return WEEKDAYS[index]


def _and(words: Sequence[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} and {words[-1]}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def schedule_text(entry: ScheduleEntry) -> str:
    """``every Monday and Thursday 10:00 America/Sao_Paulo``."""
    at = f"{entry.at:%H:%M} {entry.zone}"
    if entry.every == "week":
        days = [DAY_NAMES[d] for d in entry.weekdays]
        if len(days) == 7:
            return f"every day {at}"
        return f"every {_and(days)} {at}"
    if entry.every == "month":
        return f"every month on the {_ordinal(entry.day_of_month)} {at}"
    return f"every day {at}"


def entry_text(entry: Entry, *, segments: Mapping[int, str] | None = None) -> str:
    """How people enter, in words (see the module)."""
    if isinstance(entry, EventEntry):
        return f"event {entry.event}"
    if isinstance(entry, SegmentEntry):
        name = (segments or {}).get(entry.segment_id, f"#{entry.segment_id} (gone)")
        text = f"segment {name} newly"
        return f"{text}, and who is in it at go-live" if entry.backfill else text
    if isinstance(entry, DateEntry):
        offset = entry.offset_days
        when = (
            entry.field
            if not offset
            else f"{abs(offset)} day{'s' if abs(offset) != 1 else ''} "
            f"{'before' if offset < 0 else 'after'} {entry.field}"
        )
        return f"{when} at {entry.at:%H:%M} local{', every year' if entry.yearly else ''}"
    assert isinstance(entry, ScheduleEntry)
    return schedule_text(entry)


def repeated_campaign(entry: Entry, campaigns: Mapping[int, str]) -> str:
    """The campaign a recurring campaign repeats, by name ("" for other entries)."""
    if not isinstance(entry, ScheduleEntry):
        return ""
    return campaigns.get(entry.campaign_id, f"campaign #{entry.campaign_id} (gone)")


def _target(step_id: str) -> str:
    return "the end" if step_id == END else step_id


def step_text(step: Step) -> str:
    """What a step does, in words: ``waits 1 h``, ``sends cart_reminder``."""
    if isinstance(step, SendStep):
        language = f" ({step.language})" if step.language else ""
        text = f"sends {step.template}{language}"
        if step.window_text:
            buttons = f" with {len(step.window_buttons)} button(s)" if step.window_buttons else ""
            text += f"; a text{buttons} instead when the 24-hour window is open"
        return text
    if isinstance(step, WaitStep):
        return wait_text(step)
    if isinstance(step, BranchStep):
        return (
            f"if {condition_text(step.condition)} → {_target(step.then)}, "
            f"else → {_target(step.otherwise)}"
        )
    if isinstance(step, SplitStep):
        return "splits " + ", ".join(f"{p} % → {_target(t)}" for p, t in step.arms)
    if isinstance(step, EmitStep):
        return f"sends the event {step.event_type} out"
    assert isinstance(step, ExitStep)
    return f"exits: {step.reason}"


def wait_text(step: WaitStep) -> str:
    if step.until is not None:
        days = ", ".join(DAY_SHORT[d] for d in step.until_weekdays)
        days = f" on {days}" if days else ""
        return f"waits until {step.until:%H:%M} local{days}"
    if step.waits_for_something:
        what = f"the event {step.event}" if step.event else "a reply"
        return (
            f"waits for {what}, at most {duration_text(step.timeout_s)}: "
            f"if it comes → {_target(step.on_event or step.next)}, "
            f"else → {_target(step.on_timeout or step.next)}"
        )
    return f"waits {duration_text(step.delay_s)}"


def settings_text(definition: Definition) -> list[tuple[str, str]]:
    """The definition's settings as (label, words), for the journey page."""
    rows: list[tuple[str, str]] = []
    if definition.key:
        rows.append(("One instance per", f"{definition.key} (an event property)"))
    if definition.exits:
        rows.append(("Leaves on", "; ".join(f"{e.event} ({e.reason})" for e in definition.exits)))
    if definition.re_entry == "after_days":
        rows.append(("Enters again", f"at most once every {definition.re_entry_days} days"))
    else:
        rows.append(("Enters again", RE_ENTRY_TEXT.get(definition.re_entry, definition.re_entry)))
    if definition.window is not None:
        zone = definition.time_zone or "UTC"
        rows.append(
            ("Sends between", f"{definition.window} in each person's zone (default {zone})")
        )
    elif definition.time_zone:
        rows.append(("Default time zone", definition.time_zone))
    if definition.holdout_percent:
        rows.append(("Held out", f"{definition.holdout_percent:g} %"))
    if definition.goal_event:
        rows.append(("Goal", f"{definition.goal_event} within {definition.goal_days} days"))
    rows.append(("Too late after", duration_text(definition.lateness_s)))
    if definition.frequency_cap:
        later = ", sent later when capped" if definition.frequency_cap_defer else ""
        rows.append(("Frequency cap", f"{definition.frequency_cap}{later}"))
    return rows
