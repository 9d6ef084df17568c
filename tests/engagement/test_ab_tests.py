"""A/B tests and holdouts: who is in which arm, the decision, and the winner sent to the rest.

The end-to-end test runs two templates through the simulator, told to have them read at
different rates (``template_read_fractions``), with the read receipts posted as signed
callbacks to the live server: the better template must win on the read rate and go to
the held remainder, and every recipient must get exactly one message.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from campaigns.models import (
    AbMetric,
    AbState,
    Campaign,
    CampaignVariant,
    Contact,
    ContactList,
    ListMembership,
    Template,
)
from delivery.campaigns.ab_launch import variants_errors
from delivery.campaigns.ab_tests import (
    AbTestError,
    ab_summary,
    ab_tests_check,
    ab_winner_pick,
)
from delivery.campaigns.canary import HOLD_AT
from delivery.campaigns.launch import LaunchError, campaign_start
from delivery.campaigns.skips import HOLDOUT
from delivery.models import Message
from tests.engine_support import number_on, running_simulator, settle, simulator_calling
from tests.factories import make_campaign, make_contact_list, make_phone_number, make_template
from tests.webhooks.support import APP_SECRET
from whatsblast.core.redis import get_redis

pytestmark = pytest.mark.django_db(transaction=True)


def people(count: int, *, start: int = 0) -> ContactList:
    contact_list = make_contact_list()
    contacts = Contact.objects.bulk_create(
        Contact(phone=f"+5511{9_1000_0000 + start + i:09d}", name=f"P{i}") for i in range(count)
    )
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=contact_list, contact=c) for c in contacts
    )
    return contact_list


def ab_campaign(
    number: Any, templates: list[Template], contact_list: ContactList, **fields: Any
) -> Campaign:
    mappings = fields.pop("mappings", None) or [
        {"body": {"1": {"field": "name"}}} for _ in templates
    ]
    campaign = make_campaign(
        phone_number=number,
        template=templates[0],
        lists=[contact_list],
        param_mapping=mappings[0],
        **fields,
    )
    for position, (template, mapping) in enumerate(zip(templates, mappings, strict=True)):
        CampaignVariant.objects.create(
            campaign=campaign, position=position, template=template, param_mapping=mapping
        )
    return campaign


def test_launch_puts_each_sendable_recipient_in_one_arm_the_holdout_or_the_held_rest() -> None:
    number = make_phone_number()
    a = make_template(account=number.account, name="tea_a")
    b = make_template(account=number.account, name="tea_b", body_text="Hello {{1}}")
    contact_list = people(2000)
    campaign = ab_campaign(
        number,
        [a, b],
        contact_list,
        mappings=[{"body": {"1": {"field": "name"}}}, {"body": {"1": {"value": "friend"}}}],
        ab_test_percent=40,
        holdout_percent=10,
    )
    campaign_start(campaign=campaign)

    rows = list(Message.objects.filter(campaign=campaign))
    assert len(rows) == 2000 and len({r.contact_id for r in rows}) == 2000
    holdout = [r for r in rows if r.skip_reason == HOLDOUT]
    # 10% of 2,000 is 200, one standard deviation 13.4: 4.5 of them either way.
    assert 140 <= len(holdout) <= 260
    assert all(r.status == "skipped" and r.variant is None for r in holdout)
    arms = {0: [r for r in rows if r.variant == 0], 1: [r for r in rows if r.variant == 1]}
    sendable = 2000 - len(holdout)
    for arm in arms.values():
        # 20% of the sendable each (expected 360, sd 17).
        assert abs(len(arm) - sendable * 0.2) <= 80, len(arm)
        assert all(r.status == "pending" and r.next_attempt_at < HOLD_AT for r in arm)
    assert {r.template_id for r in arms[0]} == {a.pk}
    assert {r.template_id for r in arms[1]} == {b.pk}
    names = dict(Contact.objects.values_list("id", "name"))
    assert all(r.params == {"body": [names[r.contact_id]]} for r in arms[0])
    assert {json.dumps(r.params) for r in arms[1]} == {json.dumps({"body": ["friend"]})}
    rest = [r for r in rows if r.variant is None and r.skip_reason == ""]
    assert len(rest) == sendable - len(arms[0]) - len(arms[1])
    assert all(r.status == "pending" and r.next_attempt_at == HOLD_AT for r in rest)
    campaign.refresh_from_db()
    assert campaign.ab_state == AbState.TESTING
    # Nothing sent yet: every arm reads 0 of 0, nobody leads, nothing to decide.
    summary = ab_summary(campaign)
    assert summary is not None and summary.leader is None and not summary.ready
    assert [(a.sent, a.rate, a.interval) for a in summary.arms] == [(0, 0.0, (0.0, 0.0))] * 2
    assert summary.held == len(rest)
    # The draw is the same every time it is made: a second launch changes nothing.
    Campaign.objects.filter(pk=campaign.pk).update(status="draft")
    campaign_start(campaign=Campaign.objects.get(pk=campaign.pk))
    again = dict(Message.objects.filter(campaign=campaign).values_list("id", "variant"))
    assert again == {r.id: r.variant for r in rows}


def test_a_test_that_cannot_run_is_refused_with_the_reason() -> None:
    number = make_phone_number()
    a = make_template(account=number.account, name="solo")
    pending = make_template(account=number.account, name="later", status="PENDING")
    contact_list = people(5)
    lonely = ab_campaign(number, [a], contact_list, ab_test_percent=50)
    with pytest.raises(LaunchError, match="an A/B test has 2 to 5 variants, this one has 1"):
        campaign_start(campaign=lonely)
    mixed = ab_campaign(number, [a, pending], contact_list, ab_test_percent=50, canary_size=10)
    errors = variants_errors(mixed, [(v.template, v.param_mapping) for v in mixed.variants.all()])
    assert errors == [
        "an A/B test already sends to a share first: turn the canary off, or the test",
        "variant B: template later (en_US) is PENDING, not APPROVED",
    ]
    bad_mapping = ab_campaign(
        number, [a, a], contact_list, ab_test_percent=50, mappings=[{"body": {}}, {"body": {}}]
    )
    bad_mapping.param_mapping = {"body": {"1": {"field": "name"}}}
    bad_mapping.save()
    with pytest.raises(LaunchError, match="variant A: template solo body param"):
        campaign_start(campaign=bad_mapping)
    assert not Message.objects.exists()


def test_no_test_no_variant_and_no_hold() -> None:
    number = make_phone_number()
    campaign = make_campaign(phone_number=number, lists=[people(20)])
    campaign_start(campaign=campaign)
    assert set(Message.objects.values_list("variant", flat=True)) == {None}
    assert not Message.objects.filter(next_attempt_at=HOLD_AT).exists()
    campaign.refresh_from_db()
    assert campaign.ab_state == AbState.NONE and ab_summary(campaign) is None


def _recheck(campaign: Campaign) -> Any:
    """The tick's A/B pass now, as if its half-minute pause had passed."""
    get_redis().delete(f"wb:ab-check:{campaign.pk}")
    return ab_tests_check()


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_the_better_read_template_wins_and_goes_to_the_rest_each_recipient_once(
    live_server: Any, settings: Any
) -> None:
    settings.WHATSAPP_APP_SECRET = APP_SECRET
    recipients = 400
    with simulator_calling(
        live_server,
        APP_SECRET,
        template_read_fractions={"tea_plain": 0.15, "tea_photo": 0.75},
        webhook_batch_size=20,
    ) as sim:
        number = number_on(sim, rate=400, reserve=0.0)
        templates = []
        for name in ("tea_plain", "tea_photo"):
            templates.append(make_template(account=number.account, name=name))
            sim.add_template(
                name=name,
                language="en_US",
                body_params=1,
                waba_id=number.account.waba_id,
                category="MARKETING",
            )
        campaign = ab_campaign(
            number,
            templates,
            people(recipients),
            mappings=[{"body": {"1": {"field": "name"}}}, {"body": {"1": {"value": "friend"}}}],
            ab_test_percent=50,
            ab_metric=AbMetric.READ,
            ab_decide_after_hours=0,
            ab_decide_min_sample=60,
        )
        campaign_start(campaign=campaign)
        held = Message.objects.filter(campaign=campaign, next_attempt_at=HOLD_AT)
        assert held.count() == Message.objects.filter(campaign=campaign, variant=None).count()
        # The arms are sent and read; the tick decides as soon as every arm has its
        # sample (decide after 0 hours) and gives the rest the winner.
        settle(sim)
        _recheck(campaign)  # in case the tick looked before the reads were in
        settle(sim)
        records = [r for r in sim.records(bodies=True) if r.get("code") in (None, "200")]

    campaign.refresh_from_db()
    assert campaign.ab_state == AbState.DECIDED
    assert campaign.ab_winner is not None and campaign.ab_winner.position == 1
    assert campaign.ab_decision.startswith("Variant B (tea_photo (en_US)), decided automatically")
    summary = ab_summary(campaign)
    assert summary is not None
    plain, photo = summary.arms
    assert photo.rate > plain.rate and photo.probability_best > 0.99
    assert photo.comparison is not None and photo.comparison.p_value is not None
    assert photo.comparison.p_value < 0.001 and photo.comparison.interval.low > 0
    assert summary.held == 0

    rows = list(Message.objects.filter(campaign=campaign))
    assert len(rows) == recipients
    assert {r.status for r in rows} <= {"sent", "delivered", "read"}
    rest = [r for r in rows if r.variant is None]
    assert rest and {r.template_id for r in rest} == {templates[1].pk}
    # None of the rest went before the decision.
    assert campaign.ab_decided_at is not None
    assert min(r.sent_at for r in rest if r.sent_at) >= campaign.ab_decided_at
    assert {json.dumps(r.params) for r in rest} == {json.dumps({"body": ["friend"]})}
    for arm, template in enumerate(templates):
        assert {r.template_id for r in rows if r.variant == arm} == {template.pk}
    # The simulator saw one accepted send per recipient, each the template its row says.
    sends = [json.loads(r["body"]) for r in records if r.get("body")]
    assert len(records) == recipients
    by_phone = {r.to.lstrip("+"): r for r in rows}
    assert len({s["to"].lstrip("+") for s in sends}) == len(sends)
    names = {t.pk: t.name for t in templates}
    for send in sends:
        row = by_phone[send["to"].lstrip("+")]
        assert send["template"]["name"] == names[row.template_id]


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_without_auto_winner_the_marketer_picks_and_the_pick_is_final() -> None:
    with running_simulator(read_fraction=0.0) as sim:
        number = number_on(sim, rate=400, reserve=0.0)
        templates = []
        for name in ("tea_one", "tea_two"):
            templates.append(make_template(account=number.account, name=name))
            sim.add_template(
                name=name, language="en_US", body_params=1, waba_id=number.account.waba_id
            )
        campaign = ab_campaign(
            number,
            templates,
            people(100, start=5000),
            ab_test_percent=30,
            ab_decide_after_hours=0,
            ab_decide_min_sample=5,
            ab_auto_winner=False,
        )
        campaign_start(campaign=campaign)
        settle(sim)
        _recheck(campaign)
        campaign.refresh_from_db()
        assert campaign.ab_state == AbState.WAITING_PICK
        assert Message.objects.filter(campaign=campaign, next_attempt_at=HOLD_AT).count() == (
            Message.objects.filter(campaign=campaign, variant=None).count()
        )
        with pytest.raises(AbTestError, match="no variant 4"):
            ab_winner_pick(campaign=campaign, position=4)
        ab_winner_pick(campaign=campaign, position=0)  # the marketer may pick either
        with pytest.raises(AbTestError, match="already decided"):
            ab_winner_pick(campaign=campaign, position=1)
        settle(sim)
        assert len(sim.records()) == 100
    campaign.refresh_from_db()
    assert campaign.ab_state == AbState.DECIDED and campaign.ab_winner is not None
    assert campaign.ab_winner.position == 0
    assert "picked by the marketer" in campaign.ab_decision
    rest = Message.objects.filter(campaign=campaign, variant__isnull=True)
    assert set(rest.values_list("template_id", flat=True)) == {templates[0].pk}
    assert set(rest.values_list("status", flat=True)) == {"sent"}


def test_a_pick_on_a_campaign_without_a_test_is_refused() -> None:
    campaign = make_campaign()
    with pytest.raises(AbTestError, match="runs no A/B test"):
        ab_winner_pick(campaign=campaign, position=0)
