"""Tracked links at launch and at send: the marker in the row, the recipient's token in the
request Meta gets, and the launch refusing a link that could not work.

The template is in the shape Meta documents for a dynamic URL button ("URL buttons" in
"Template components": ``"url": "https://…/{{1}}"`` with an ``example``), its approved
address the deployment's ``CLICK_BASE_URL``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from campaigns.catalogue.components import components_parse
from campaigns.models import Campaign, Template
from delivery.campaigns.launch import LaunchError, campaign_start
from delivery.campaigns.preflight import campaign_preflight
from delivery.models import Message
from tests.engine_support import number_on, running_simulator, work_burst
from tests.factories import make_campaign, make_contact, make_contact_list
from whatsblast.core.click_tokens import message_id_from_token
from whatsblast.core.tracked_links import CLICK_MARKER

pytestmark = pytest.mark.django_db(transaction=True)

BASE = "https://go.example.com/c"


def components(url: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "BODY",
            "text": "Hi {{1}}, our sale is on: {{2}}",
            "example": {"body_text": [["Ana", "https://go.example.com/c/k3x9"]]},
        },
        {
            "type": "BUTTONS",
            "buttons": [
                {"type": "URL", "text": "Shop now", "url": url, "example": [f"{BASE}/k3x9"]}
            ],
        },
    ]


def tracked_template(number: Any, url: str = f"{BASE}/{{{{1}}}}") -> Template:
    parsed = components_parse(components(url))
    return Template.objects.create(
        account=number.account,
        name="sale_link",
        language="en_US",
        category="MARKETING",
        components=components(url),
        body_text=parsed.body_text,
        body_param_count=parsed.body_param_count,
        body_examples=parsed.body_examples,
        buttons=parsed.buttons,
    )


MAPPING = {
    "body": {"1": {"field": "name"}, "2": {"click": True}},
    "buttons": {"0": {"click": True}},
}


def tracked_campaign(number: Any, template: Template, **fields: Any) -> Campaign:
    contact_list = make_contact_list()
    for index in range(6):
        make_contact(
            phone=f"+5511{9_2000_0000 + index:09d}", name=f"N{index}", contact_list=contact_list
        )
    fields.setdefault("link_destination", "https://shop.example.com/sale?who={{name}}")
    return make_campaign(
        phone_number=number,
        template=template,
        lists=[contact_list],
        param_mapping=MAPPING,
        **fields,
    )


@override_settings(CLICK_BASE_URL=BASE, CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_each_send_carries_its_own_token_in_the_button_and_the_link_in_the_body() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        template = tracked_template(number)
        sim.add_template(
            name=template.name,
            language="en_US",
            components=components(f"{BASE}/{{{{1}}}}"),
            category="MARKETING",
            waba_id=number.account.waba_id,
        )
        campaign = tracked_campaign(number, template)
        assert campaign_preflight(campaign=campaign).ok
        campaign_start(campaign=campaign)
        stored = {m.to: m for m in Message.objects.filter(campaign=campaign)}
        # At launch the row holds the marker: its id, which the token is made from,
        # did not exist while the statement rendered it.
        assert all(m.params["buttons"][0]["value"] == CLICK_MARKER for m in stored.values())
        work_burst()
        bodies = [json.loads(r["body"]) for r in sim.records(bodies=True) if r.get("body")]
    assert len(bodies) == 6
    tokens = set()
    for body in bodies:
        message = stored["+" + body["to"].lstrip("+")]
        parts = {c["type"]: c for c in body["template"]["components"]}
        token = parts["button"]["parameters"][0]["text"]
        assert message_id_from_token(token) == message.pk
        assert [p["text"] for p in parts["body"]["parameters"]] == [
            message.params["body"][0],
            f"{BASE}/{token}",
        ]
        tokens.add(token)
    assert len(tokens) == 6
    # The stored row keeps the marker: the token is derived, never stored.
    kept = Message.objects.filter(campaign=campaign, params__buttons__0__value=CLICK_MARKER)
    assert kept.count() == 6


@override_settings(CLICK_BASE_URL="")
def test_without_a_click_address_the_launch_is_refused_saying_so() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        campaign = tracked_campaign(number, tracked_template(number))
        findings = [f.text for f in campaign_preflight(campaign=campaign).errors]
        assert any("Tracked link: a tracked link needs CLICK_BASE_URL" in t for t in findings)
        with pytest.raises(LaunchError, match="needs CLICK_BASE_URL"):
            campaign_start(campaign=campaign)
    assert not Message.objects.exists()


@override_settings(CLICK_BASE_URL=BASE)
def test_a_button_approved_elsewhere_or_no_destination_is_refused() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        elsewhere = tracked_template(number, url="https://shop.example.com/p/{{1}}")
        campaign = tracked_campaign(number, elsewhere, link_destination="")
        with pytest.raises(LaunchError) as refused:
            campaign_start(campaign=campaign)
    text = str(refused.value)
    assert "a tracked link needs a destination" in text
    assert (
        "template sale_link button 0 was approved as https://shop.example.com/p/{{1}}; "
        f"a tracked button's URL is {BASE}/{{{{1}}}}"
    ) in text


def test_a_click_source_is_only_for_a_body_parameter_or_a_url_button() -> None:
    from campaigns.catalogue.params import ParamMappingError, mapping_validate

    template = Template(
        name="t", body_text="Hi {{1}}", body_param_count=1, header_format="TEXT", header_param="1"
    )
    with pytest.raises(ParamMappingError, match="a tracked link goes in a body parameter"):
        mapping_validate(template, {"header": {"click": True}, "body": {"1": {"value": "x"}}})
    with pytest.raises(ParamMappingError, match="a tracked link is {'click': true}"):
        mapping_validate(template, {"body": {"1": {"click": "yes"}}})
