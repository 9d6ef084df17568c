"""Helpers for end-to-end engine tests: a simulator, a number that points at it, workers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import django_rq

from campaigns.models import Campaign, PhoneNumber
from delivery.simulator.config import SimConfig
from delivery.simulator.server import SimulatorServer
from tests.factories import (
    make_account,
    make_campaign,
    make_contact_list,
    make_phone_number,
    make_template,
)
from webhooks.applier import events_drain
from whatsblast.rq import SimpleWorker
from whatsblast.tick import maintenance_tick

QUEUES = ("transactional", "campaigns", "maintenance")


@contextmanager
def running_simulator(**config: Any) -> Iterator[SimulatorServer]:
    config.setdefault("pair_limit_enabled", False)
    server = SimulatorServer(SimConfig(**config)).start()
    try:
        yield server
    finally:
        server.stop()


def number_on(
    server: SimulatorServer,
    *,
    rate: int,
    reserve: float = 0.2,
    tier: str = "TIER_UNLIMITED",
    **fields: Any,
) -> PhoneNumber:
    number = make_phone_number(
        account=make_account(messaging_limit_tier=tier),
        rate_per_second=rate,
        transactional_reserve=reserve,
        api_base_url=server.url,
        access_token="sim-token",
        **fields,
    )
    server.add_number(
        phone_number_id=number.phone_number_id,
        access_token="sim-token",
        rate=rate,
        waba_id=number.account.waba_id,
    )
    return number


def campaign_on(
    server: SimulatorServer, number: PhoneNumber, *, recipients: int, **fields: Any
) -> Campaign:
    from campaigns.models import Contact, ListMembership

    contact_list = make_contact_list()
    first = Contact.objects.count()  # several campaigns in one test get distinct people
    contacts = Contact.objects.bulk_create(
        Contact(phone=f"+5511{9_0000_0000 + first + i:09d}", name=f"C{i}")
        for i in range(recipients)
    )
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=contact_list, contact=c) for c in contacts
    )
    template = make_template(account=number.account, name=f"promo_{number.pk}")
    server.add_template(
        name=template.name,
        language=template.language,
        body_params=1,
        waba_id=number.account.waba_id,
        category=template.category,
    )
    return make_campaign(phone_number=number, template=template, lists=[contact_list], **fields)


def work_burst(*queues: str) -> None:
    """Run every queued job (and the jobs they enqueue) in this process, then return."""
    worker = django_rq.get_worker(*(queues or QUEUES), worker_class=SimpleWorker)
    worker.work(burst=True, with_scheduler=False)


def settle(sim: SimulatorServer) -> None:
    """Send what is due, let every callback land, apply them, and tick (three rounds)."""
    for _ in range(3):
        work_burst()
        assert sim.wait_webhooks_idle(timeout=30)
        events_drain(budget_seconds=30)
        maintenance_tick()


def max_per_second(histogram: dict[str, int]) -> int:
    return max(histogram.values(), default=0)


def reset_client() -> None:
    """Drop the process's Cloud API clients so the next ones read the current settings."""
    from delivery.cloud import client as cloud_api
    from delivery.cloud.transport import reset_transport

    reset_transport()
    with cloud_api._client_lock:
        if cloud_api._client is not None:
            cloud_api._client.close()
        cloud_api._client = None


def simulator_calling(live_server: Any, app_secret: str, **config: Any) -> Any:
    """A simulator that posts its signed callbacks to the live server's webhook, no reads."""
    config.setdefault("read_fraction", 0.0)
    return running_simulator(
        callback_url=f"{live_server.url}/webhooks/whatsapp", app_secret=app_secret, **config
    )


def report_figure(html: str, table: str, key: str) -> str:
    """The figure of row ``key`` in the report's table ``table`` (its first cell)."""
    found = re.search(rf'<table[^>]*id="{table}".*?</table>', html, re.S)
    assert found is not None, f"no table {table} on the report"
    cell = re.search(rf'<tr data-figure="{key}"><th>[^<]*</th><td[^>]*>(.*?)</td>', found[0])
    assert cell is not None, f"no row {key} in {table}"
    return cell[1].strip()
