"""The send trace: the moment each campaign send was granted, beside the receiver's stamp."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from delivery.campaigns.launch import campaign_start
from delivery.engine.send_trace import grants_read
from delivery.models import Message
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_campaign_send_is_recorded_at_its_grant_within_the_rate(
    settings: Any, tmp_path: Path
) -> None:
    settings.SEND_TRACE_DIR = str(tmp_path / "grants")
    with running_simulator(latency_ms=20) as sim:
        number = number_on(sim, rate=50, reserve=0)
        campaign = campaign_on(sim, number, recipients=120)
        campaign_start(campaign=campaign)
        work_burst()

    grants = grants_read(tmp_path / "grants")
    sent = set(
        Message.objects.filter(campaign=campaign, status="sent").values_list("pk", flat=True)
    )
    assert len(sent) == 120
    assert set(grants) == sent
    assert {phone_number_id for phone_number_id, _ in grants.values()} == {number.phone_number_id}
    # The grants themselves never put more than the rate into a calendar second.
    per_second = Counter(int(at) for _, at in grants.values())
    assert max(per_second.values()) <= 50
