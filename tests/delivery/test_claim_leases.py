"""A sender's ready rows remember their claim: none is sent once its claim's lease ran out.

Rows past their lease are the reconciler's (``lease expired``, then evidence or the resend
policy) and may already be claimed again by another worker: the sender forgets them
instead of sending or releasing them. The fault suite's partition_redis scenario shows the
same on a real network.
"""

from __future__ import annotations

import pytest

from delivery.engine.sender import campaign_run
from delivery.messages import ClaimedMessage
from tests.factories import make_campaign

pytestmark = pytest.mark.django_db


def _rows(first: int, n: int) -> list[ClaimedMessage]:
    return [ClaimedMessage(i, f"+4915{i:08d}", {}, 1, 0, None) for i in range(first, first + n)]


def test_rows_of_an_expired_claim_are_dropped_and_a_later_claim_kept() -> None:
    run = campaign_run(make_campaign())
    run.rows_add(_rows(1, 3), stale_at=10.0)
    run.rows_add(_rows(4, 2), stale_at=20.0)
    assert run.row_take().id == 1  # one of the first claim sent in time
    assert run.stale_drop(9.9) == 0
    # At 10 s the first claim's two rows left are forgotten, the second claim's stay.
    assert run.stale_drop(10.0) == 2
    assert [m.id for m in run.ready] == [4, 5]
    assert run.row_take().id == 4
    assert run.stale_drop(25.0) == 1
    assert not run.ready and not run.claims


def test_clearing_forgets_the_claims_too() -> None:
    run = campaign_run(make_campaign())
    run.rows_add(_rows(1, 2), stale_at=5.0)
    assert [m.id for m in run.rows_clear()] == [1, 2]
    run.rows_add(_rows(3, 1), stale_at=50.0)
    assert run.stale_drop(6.0) == 0  # the cleared claim's deadline is gone with it
    assert [m.id for m in run.ready] == [3]
