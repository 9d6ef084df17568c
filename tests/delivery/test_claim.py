"""Claiming: concurrent claimers never share a row; only due pending rows are taken."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from delivery.campaigns.launch import campaign_start
from delivery.messages import claim_campaign_batch, claim_message, release_messages
from delivery.models import Message, MessageStatus
from tests.factories import make_campaign, make_contact, make_contact_list

pytestmark = pytest.mark.django_db(transaction=True)


def launched_campaign(n: int):
    contact_list = make_contact_list()
    Contact = make_contact  # noqa: N806 - builder
    for i in range(n):
        Contact(phone=f"+3361{i:07d}", name=f"N{i}", contact_list=contact_list)
    campaign = make_campaign(lists=[contact_list])
    campaign_start(campaign=campaign)
    return campaign


def test_four_concurrent_claimers_partition_the_rows() -> None:
    campaign = launched_campaign(400)
    claimed: list[list[int]] = []
    errors: list[BaseException] = []

    def claimer() -> None:
        mine: list[int] = []
        try:
            while rows := claim_campaign_batch(campaign_id=campaign.pk, limit=17):
                mine.extend(r.id for r in rows)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()
        claimed.append(mine)

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    all_ids = [i for mine in claimed for i in mine]
    assert len(all_ids) == 400
    assert len(set(all_ids)) == 400
    assert Message.objects.filter(campaign=campaign, status=MessageStatus.SENDING).count() == 400
    assert not Message.objects.filter(campaign=campaign, claimed_at__isnull=True).exists()


def test_future_rows_are_not_claimed_and_release_returns_rows() -> None:
    campaign = launched_campaign(3)
    later = Message.objects.filter(campaign=campaign).order_by("id").first()
    Message.objects.filter(pk=later.pk).update(
        next_attempt_at=timezone.now() + timedelta(minutes=5)
    )
    rows = claim_campaign_batch(campaign_id=campaign.pk, limit=10)
    assert {r.id for r in rows} == set(
        Message.objects.filter(campaign=campaign).exclude(pk=later.pk).values_list("id", flat=True)
    )
    assert release_messages(ids=[r.id for r in rows]) == 2
    assert Message.objects.filter(campaign=campaign, status=MessageStatus.PENDING).count() == 3


def test_claiming_one_message_twice_gives_it_once() -> None:
    campaign = launched_campaign(1)
    message = Message.objects.get(campaign=campaign)
    assert claim_message(message_id=message.pk) is not None
    assert claim_message(message_id=message.pk) is None
