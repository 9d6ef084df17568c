"""The messaging-limit budget survives the loss of its Redis set: rebuilt from the table."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.engine.reach import reach_admit, reach_from_table, reach_key, reach_used
from tests.factories import make_account, make_campaign, make_message, make_phone_number

pytestmark = pytest.mark.django_db


def test_a_lost_set_is_rebuilt_from_the_table_before_anything_is_admitted(redis_conn) -> None:
    account = make_account(messaging_limit_tier="TIER_250")
    campaign = make_campaign(phone_number=make_phone_number(account=account))
    now = timezone.now()
    make_message(campaign=campaign, to="+491", status="delivered", sent_at=now)
    make_message(campaign=campaign, to="+492", status="unknown", claimed_at=now)
    # In flight for a while: admitted before Redis went away.
    make_message(
        campaign=campaign, to="+493", status="sending", claimed_at=now - timedelta(seconds=5)
    )
    # Not evidence of reach: just claimed (not admitted yet), a day old, never sent.
    make_message(campaign=campaign, to="+494", status="sending", claimed_at=now)
    make_message(campaign=campaign, to="+495", status="sent", sent_at=now - timedelta(hours=25))
    make_message(campaign=campaign, to="+496", status="pending")
    redis_conn.delete(reach_key(account.waba_id))

    def seed() -> list[tuple[str, int]]:
        return reach_from_table(waba_id=account.waba_id)

    assert sorted(to for to, _ in seed()) == ["+491", "+492", "+493"]
    admission = reach_admit(
        waba_id=account.waba_id, limit=4, recipients=["+491", "+497", "+498"], seed=seed
    )
    # Three users already reached: room for one new user only.
    assert admission.admitted == ["+491", "+497"]
    assert admission.refused == ["+498"]
    assert reach_used(waba_id=account.waba_id) == 4


def test_an_existing_set_is_not_reseeded(redis_conn) -> None:
    calls: list[int] = []

    def seed() -> list[tuple[str, int]]:
        calls.append(1)
        return []

    reach_admit(waba_id="w-seed", limit=5, recipients=["+1"], seed=seed)
    reach_admit(waba_id="w-seed", limit=5, recipients=["+2"], seed=seed)
    assert calls == [1]
