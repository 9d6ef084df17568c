"""A journey's JSON contract: what it accepts, and every problem named by its path."""

from __future__ import annotations

from typing import Any

import pytest

from journeys.definition import (
    BranchStep,
    ButtonCondition,
    DateEntry,
    DefinitionError,
    EventEntry,
    ScheduleEntry,
    SendStep,
    WaitStep,
    definition_parse,
)

CART: dict[str, Any] = {
    "entry": {"type": "event", "event": "cart_updated"},
    "key": "cart_id",
    "exits": [{"event": "checkout", "reason": "bought"}],
    "window": "09:00-21:00",
    "time_zone": "america/sao_paulo",
    "steps": [
        {"id": "wait", "type": "wait", "delay": {"hours": 1}},
        {"id": "remind", "type": "send", "template": "cart_reminder",
         "mapping": {"buttons": {"0": {"property": "cart_path"}}},
         "if_window_open": {"text": "Still there?", "buttons": [{"id": "y", "title": "Yes"}]}},
        {"id": "reply", "type": "wait", "for_reply": True, "timeout": {"hours": 24},
         "on_reply": "tapped"},
        {"id": "again", "type": "send", "template": "cart_last_call"},
        {"id": "done", "type": "exit", "reason": "reminded twice"},
        {"id": "tapped", "type": "branch", "if": {"button": "Yes"}, "then": "done",
         "else": "end"},
    ],
}  # fmt: skip


def problems(data: Any) -> dict[str, str]:
    with pytest.raises(DefinitionError) as caught:
        definition_parse(data)
    return caught.value.problems


def with_steps(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"entry": {"type": "event", "event": "x"}, "steps": list(steps), **extra}


def test_the_cart_journey_reads_whole() -> None:
    d = definition_parse(CART)
    assert d.entry == EventEntry("cart_updated")
    assert d.key == "cart_id" and d.exit_reasons("checkout") == ["bought"]
    assert d.time_zone == "America/Sao_Paulo"  # any case, spelt properly
    assert str(d.window) == "09:00-21:00"
    wait, remind, reply, again, _, tapped = d.steps
    assert isinstance(wait, WaitStep) and wait.delay_s == 3600 and wait.next == "remind"
    assert isinstance(remind, SendStep) and remind.window_buttons == (("y", "Yes"),)
    assert isinstance(reply, WaitStep) and reply.reply and reply.timeout_s == 86400
    assert reply.targets() == ("tapped", "again")  # the reply, the timeout
    assert isinstance(again, SendStep) and again.next == "done"
    assert isinstance(tapped, BranchStep) and tapped.condition == ButtonCondition("Yes")
    assert tapped.targets() == ("done", "end")
    assert d.lateness_s == 24 * 3600 and d.re_entry == "every_time"


def test_every_problem_is_named_by_its_path_at_once() -> None:
    found = problems(
        with_steps(
            {"id": "a", "type": "wait"},
            {"id": "b", "type": "send"},
            {"id": "c", "type": "wait", "for_event": "paid"},
            {"id": "d", "type": "jump"},
            {"id": "e", "type": "split", "arms": [{"percent": 60, "next": "end"},
                                                 {"percent": 30, "next": "end"}]},
            window="9-5",
            holdout_percent=80,
            colour="red",
        )
    )  # fmt: skip
    assert found == {
        "colour": found["colour"],
        "steps[0]": "a wait has one of delay, until, for_event or for_reply",
        "steps[1].template": "a non-blank text",
        "steps[2].timeout": "how long to wait at most (nobody waits for ever)",
        "steps[3].type": "one of send, wait, branch, split, emit, exit",
        "steps[4].arms": "the arms' percents add up to 100",
        "window": "'9-5' is not a window like 09:00-20:00",
        "holdout_percent": "a number from 0 to 50",
    }
    assert found["colour"].startswith("unknown setting")


def test_the_steps_form_no_loop_and_every_step_is_reached() -> None:
    loop = problems(
        with_steps(
            {"id": "a", "type": "wait", "delay": {"minutes": 5}, "next": "b"},
            {"id": "b", "type": "branch", "if": {"window_open": True}, "then": "a", "else": "end"},
        )
    )
    assert loop == {"steps[0]": "a loop: a → b → a; a step is passed once"}
    orphan = problems(
        with_steps(
            {"id": "a", "type": "exit"},
            {"id": "b", "type": "exit"},
        )
    )
    assert orphan == {"steps[1]": "'b' is never reached from the first step"}
    nowhere = problems(with_steps({"id": "a", "type": "wait", "delay": {"hours": 1}, "next": "z"}))
    assert nowhere == {"steps[0]": "goes to 'z', which is no step's id"}
    twice = problems(with_steps({"id": "a", "type": "exit"}, {"id": "a", "type": "exit"}))
    assert twice["steps[1].id"] == "'a' is taken by an earlier step"


def test_waits_durations_and_times_are_bounded() -> None:
    assert problems(with_steps({"id": "a", "type": "wait", "delay": {"seconds": 5}})) == {
        "steps[0].delay": 'a duration: {"days": D, "hours": H, "minutes": M}, any of them'
    }
    assert problems(with_steps({"id": "a", "type": "wait", "delay": {"days": 400}})) == {
        "steps[0].delay": "from one minute to 365 days"
    }
    assert problems(
        with_steps({"id": "a", "type": "wait", "for_reply": True, "timeout": {"days": 91}})
    ) == {"steps[0].timeout": "from one minute to 90 days"}
    assert problems(with_steps({"id": "a", "type": "wait", "until": "25:00"})) == {
        "steps[0].until": 'a local time of day, "HH:MM" (24-hour)'
    }
    until = definition_parse(
        with_steps({"id": "a", "type": "wait", "until": "10:30", "weekdays": ["sat", "mon"]})
    ).steps[0]
    assert isinstance(until, WaitStep) and until.until_weekdays == (0, 5)


def test_entries() -> None:
    birthday = definition_parse(
        {
            "entry": {"type": "date", "field": "birthday", "at": "10:00", "yearly": True},
            "steps": [{"id": "s", "type": "send", "template": "t"}],
        }
    )
    assert isinstance(birthday.entry, DateEntry) and birthday.entry.yearly
    weekly = definition_parse(
        {
            "entry": {
                "type": "schedule",
                "campaign": 7,
                "every": "week",
                "weekdays": ["mon", "thu"],
                "at": "10:00",
                "zone": "Asia/Manila",
                "only_new": True,
            },
        }  # fmt: skip
    )
    assert weekly.entry == ScheduleEntry(7, "week", weekly.entry.at, "Asia/Manila", (0, 3), 1, True)
    assert problems(
        {"entry": {"type": "schedule", "campaign": 7, "every": "week", "at": "10:00"}}
    ) == {"entry.weekdays": 'the days of the week it runs, e.g. ["mon"]'}
    assert problems(
        {
            "entry": {"type": "schedule", "campaign": 7, "every": "day", "at": "10:00"},
            "steps": [{"id": "s", "type": "exit"}],
        }
    ) == {"steps": "a recurring campaign has no steps: each run is its campaign, launched whole"}
    assert problems(
        {
            "entry": {"type": "date", "field": "b", "at": "10:00"},
            "key": "x",
            "steps": [{"id": "s", "type": "exit"}],
        }
    ) == {  # fmt: skip
        "key": "only a journey entered by an event is keyed by one of its properties"
    }


def test_an_emitted_event_cannot_pass_for_one_of_whatsblasts_own() -> None:
    assert problems(with_steps({"id": "e", "type": "emit", "event": "message.sent"})) == {
        "steps[0].event": "'message.sent' is in a family whatsblast sends itself"
    }
    assert problems(with_steps({"id": "e", "type": "emit", "event": "Order Cancel"})) == {
        "steps[0].event": (
            "a dotted lower-case event type of up to 40 characters, e.g. order.cancel_requested"
        )
    }
    ok = definition_parse(
        with_steps({"id": "e", "type": "emit", "event": "order.cancel_requested"})
    )
    assert ok.steps[0].type == "emit"


def test_a_free_form_message_for_an_open_window_is_within_metas_limits() -> None:
    found = problems(
        with_steps(
            {
                "id": "s",
                "type": "send",
                "template": "t",
                "if_window_open": {
                    "text": "x" * 1025,
                    "buttons": [{"id": "a", "title": "This title is far too long"}] * 4,
                },
            }
        )
    )
    assert found == {
        "steps[0].if_window_open.text": "at most 1024 characters",
        "steps[0].if_window_open.buttons": "up to 3 reply buttons",
    }


@pytest.mark.parametrize(
    "data",
    [None, [], "journey", 7, {"entry": "event"}, {"entry": {"type": "event"}, "steps": "x"}],
)
def test_anything_else_is_refused_with_a_reason(data: Any) -> None:
    assert problems(data)
