"""The messaging-limit guard budgets unique users per portfolio over a rolling 24 h."""

from __future__ import annotations

from delivery.engine.reach import reach_admit, reach_used


def test_new_users_are_admitted_until_the_limit() -> None:
    first = reach_admit(waba_id="w1", limit=3, recipients=["+1", "+2"])
    assert first.admitted == ["+1", "+2"] and first.refused == []
    second = reach_admit(waba_id="w1", limit=3, recipients=["+3", "+4", "+5"])
    assert second.admitted == ["+3"]
    assert second.refused == ["+4", "+5"]
    assert 0 < second.room_frees_in_s <= 24 * 3600
    assert reach_used(waba_id="w1") == 3


def test_users_already_reached_cost_nothing() -> None:
    reach_admit(waba_id="w2", limit=2, recipients=["+1", "+2"])
    again = reach_admit(waba_id="w2", limit=2, recipients=["+2", "+1", "+9"])
    assert again.admitted == ["+2", "+1"]
    assert again.refused == ["+9"]


def test_accounts_have_separate_budgets_and_unlimited_skips_redis() -> None:
    reach_admit(waba_id="w3", limit=1, recipients=["+1"])
    assert reach_admit(waba_id="w4", limit=1, recipients=["+1"]).admitted == ["+1"]
    unlimited = reach_admit(waba_id="w5", limit=None, recipients=["+1", "+2"])
    assert unlimited.admitted == ["+1", "+2"]
    assert reach_used(waba_id="w5") == 0
