"""The Marketing Messages API end to end on the simulator: routing by the template's
category, 131063 and 131055 rerouted once with no duplicate, the onboarding status read
from the Graph API, the time to live read at sync and set at Meta."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from campaigns.models import BusinessAccount, Campaign, PhoneNumber, Template
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.progress import campaign_routes
from delivery.cloud.client import MARKETING_MESSAGES, SendRequest, build_message_body
from delivery.cloud.template_sync import TemplateTtlError, template_ttl_set, templates_sync
from delivery.graph_reads import phone_number_graph_read
from delivery.models import Message
from delivery.simulator.server import SimulatorServer
from tests.engine_support import number_on, running_simulator, work_burst
from tests.factories import make_campaign, make_contact_list
from tests.ui.support import role_user

pytestmark = pytest.mark.django_db(transaction=True)


def campaign_of(
    sim: SimulatorServer, number: PhoneNumber, *, category: str, recipients: int, tag: str
) -> Campaign:
    """A campaign of ``recipients`` to a one-parameter template of ``category``."""
    from campaigns.models import Contact, ListMembership

    contact_list = make_contact_list(name=f"list-{tag}")
    first = Contact.objects.count()
    contacts = Contact.objects.bulk_create(
        Contact(phone=f"+5511{9_0000_0000 + first + i:09d}", name=f"C{i}")
        for i in range(recipients)
    )
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=contact_list, contact=c) for c in contacts
    )
    name = f"{tag}_{number.pk}"
    sim.add_template(
        name=name,
        language="en_US",
        body_params=1,
        category=category,
        waba_id=number.account.waba_id,
    )
    assert templates_sync(account=number.account).ok
    template = Template.objects.get(account=number.account, name=name)
    return make_campaign(
        phone_number=number,
        template=template,
        lists=[contact_list],
        param_mapping={"body": {"1": {"field": "name"}}},
    )


def routes_of(campaign: Campaign) -> dict[str, int]:
    counts: dict[str, int] = {}
    for route in Message.objects.filter(campaign=campaign).values_list("send_route", flat=True):
        counts[route] = counts.get(route, 0) + 1
    return counts


def refusals(sim: SimulatorServer, code: str) -> int:
    return sum(1 for r in sim.records() if r.get("outcome") == code)


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_marketing_goes_through_the_marketing_messages_api_and_utility_through_messages() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        BusinessAccount.objects.filter(pk=number.account_id).update(
            marketing_messages_api=True, mm_product_policy="STRICT", mm_activity_sharing=True
        )
        number.refresh_from_db()
        promo = campaign_of(sim, number, category="MARKETING", recipients=12, tag="promo")
        notice = campaign_of(sim, number, category="UTILITY", recipients=5, tag="notice")
        campaign_start(campaign=promo)
        campaign_start(campaign=notice)
        work_burst()
        stats = sim.stats()
        bodies = [json.loads(r["body"]) for r in sim.records(bodies=True) if r.get("body")]
    assert stats["accepted_by_endpoint"] == {"marketing_messages": 12, "messages": 5}
    assert routes_of(promo) == {"marketing_messages": 12}
    assert routes_of(notice) == {"": 5}
    marketing = [b for b in bodies if b["template"]["name"] == promo.template.name]
    assert {(b["product_policy"], b["message_activity_sharing"]) for b in marketing} == {
        ("STRICT", True)
    }
    utility = [b for b in bodies if b["template"]["name"] == notice.template.name]
    assert all("product_policy" not in b for b in utility)
    assert campaign_routes(campaign=promo)["routes"] == [
        {"route": "marketing_messages", "label": "Marketing Messages API", "messages": 12}
    ]
    assert campaign_routes(campaign=notice) == {}


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_131063_mid_campaign_reroutes_each_refused_send_once_with_no_duplicate() -> None:
    with running_simulator(marketing_disabled_after=7) as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        promo = campaign_of(sim, number, category="MARKETING", recipients=30, tag="promo")
        campaign_start(campaign=promo)
        work_burst()
        stats = sim.stats()
        duplicates = sim.duplicates()
        refused = refusals(sim, "131063")
    statuses = set(Message.objects.filter(campaign=promo).values_list("status", flat=True))
    assert statuses == {"sent"}
    assert stats["accepted_by_endpoint"]["messages"] == 7
    assert stats["accepted_by_endpoint"]["marketing_messages"] == 23
    assert stats["accepted"] == 30  # one accepted send per recipient, none twice
    assert not duplicates
    routes = routes_of(promo)
    # Every row refused with 131063 was sent once more, at the other endpoint; the rows
    # after it went there first.
    assert refused >= 1 and routes["rerouted_to_marketing_messages"] == refused
    assert routes[""] == 7
    assert routes["marketing_messages"] == 23 - refused
    assert not Message.objects.filter(campaign=promo).exclude(last_error_code=None).exists()


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_131055_sends_a_template_meta_recategorised_through_messages_once() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        BusinessAccount.objects.filter(pk=number.account_id).update(marketing_messages_api=True)
        number.refresh_from_db()
        promo = campaign_of(sim, number, category="UTILITY", recipients=6, tag="promo")
        # Our copy still says MARKETING (no category callback yet): the API refuses it.
        Template.objects.filter(pk=promo.template_id).update(category="MARKETING")
        promo.refresh_from_db()
        campaign_start(campaign=promo)
        work_burst()
        stats = sim.stats()
        refused = refusals(sim, "131055")
    assert set(Message.objects.filter(campaign=promo).values_list("status", flat=True)) == {"sent"}
    assert stats["accepted_by_endpoint"] == {"messages": 6}
    routes = routes_of(promo)
    assert refused >= 1 and routes["rerouted_to_messages"] == refused
    assert routes.get("", 0) == 6 - refused
    client = Client()
    client.force_login(role_user("Marketing"))
    html = client.get(reverse("admin:campaigns_campaign_report", args=[promo.pk])).content
    assert b'id="wb-report-routes"' in html
    assert b"Cloud API after a 131055 on the Marketing Messages API" in html


def test_an_account_not_onboarded_refuses_strict_sends_and_takes_fallback_ones() -> None:
    with running_simulator(mm_onboarding_status="PENDING_INTERNAL_SETUP") as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        campaign_of(sim, number, category="MARKETING", recipients=1, tag="promo")

        def send(policy: str) -> tuple[int, Any]:
            body = build_message_body(
                SendRequest(
                    base_url=sim.url, phone_number_id=number.phone_number_id,
                    access_token="sim-token", to="+5511999990001", callback_data="",
                    template_name=f"promo_{number.pk}", language="en_US",
                    params={"body": ["Ana"]}, endpoint=MARKETING_MESSAGES, product_policy=policy,
                )
            )  # fmt: skip
            import requests

            answer = requests.post(
                f"{sim.url}/v23.0/{number.phone_number_id}/marketing_messages",
                json=body,
                headers={"Authorization": "Bearer sim-token"},
                timeout=5,
            )
            return answer.status_code, answer.json()

        status, answer = send("STRICT")
        assert status == 400 and "not onboarded" in answer["error"]["error_data"]["details"]
        status, answer = send("CLOUD_API_FALLBACK")
        assert status == 200 and answer["messages"][0]["id"].startswith("wamid.")


def test_onboarding_status_is_read_from_the_graph_api() -> None:
    with running_simulator(mm_onboarding_status="ELIGIBLE") as sim:
        number = number_on(sim, rate=80)
        phone_number_graph_read(phone_number=number)
        assert BusinessAccount.objects.get(pk=number.account_id).mm_onboarding_status == "ELIGIBLE"
        sim.configure(mm_onboarding_status="ONBOARDED")
        phone_number_graph_read(phone_number=number)
        assert BusinessAccount.objects.get(pk=number.account_id).mm_onboarding_status == "ONBOARDED"


def test_the_time_to_live_is_read_at_sync_and_set_at_meta_within_its_range() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=80)
        sim.add_template(
            name="flash_sale", language="en_US", body_params=1, category="MARKETING",
            waba_id=number.account.waba_id, message_send_ttl_seconds=86_400,
        )  # fmt: skip
        assert templates_sync(account=number.account).ok
        template = Template.objects.get(name="flash_sale")
        assert template.message_send_ttl_seconds == 86_400
        with pytest.raises(TemplateTtlError, match="43,200 to 2,592,000 seconds"):
            template_ttl_set(template=template, seconds=600)
        template_ttl_set(template=template, seconds=172_800)
        assert Template.objects.get(pk=template.pk).message_send_ttl_seconds == 172_800
        assert templates_sync(account=number.account).ok  # Meta now lists the new value
        assert Template.objects.get(pk=template.pk).message_send_ttl_seconds == 172_800


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_sends_meta_delivered_through_cloud_api_instead_are_counted_as_fallbacks(
    live_server: Any, settings: Any
) -> None:
    from tests.engine_support import settle, simulator_calling
    from tests.webhooks.support import APP_SECRET

    settings.WHATSAPP_APP_SECRET = APP_SECRET
    with simulator_calling(
        live_server, APP_SECRET, mm_onboarding_status="PENDING_INTERNAL_SETUP"
    ) as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        BusinessAccount.objects.filter(pk=number.account_id).update(marketing_messages_api=True)
        number.refresh_from_db()
        promo = campaign_of(sim, number, category="MARKETING", recipients=8, tag="promo")
        campaign_start(campaign=promo)
        settle(sim)
    rows = Message.objects.filter(campaign=promo)
    assert set(rows.values_list("status", flat=True)) == {"delivered"}
    assert set(rows.values_list("pricing_category", flat=True)) == {"marketing"}
    routes = campaign_routes(campaign=promo)
    assert routes["routes"][0]["messages"] == 8 and routes["cloud_api_fallback"] == 8
    client = Client()
    client.force_login(role_user("Marketing"))
    html = client.get(reverse("admin:campaigns_campaign_report", args=[promo.pk])).content.decode()
    assert '<td class="wb-num" id="wb-cloud-fallback">8</td>' in html
