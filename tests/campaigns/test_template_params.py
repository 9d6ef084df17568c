"""Campaign params from the parsed template: header, body and buttons, validated and rendered.

The end-to-end tests send through the engine to the simulator, which checks every send
against the template as Meta would (header type, parameter counts, button indexes).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import override_settings

from campaigns.catalogue.components import components_parse
from campaigns.catalogue.params import (
    ParamMappingError,
    mapping_validate,
    params_render,
    params_sql,
    required_fields,
    template_param_slots,
)
from campaigns.drafts import campaign_create, param_mapping_from_specs, param_mapping_validate
from campaigns.models import BusinessAccount, CampaignStatus, Template, TemplateStatus
from delivery.campaigns.launch import LaunchError, campaign_start
from delivery.cloud.client import build_components
from delivery.cloud.template_sync import templates_sync
from delivery.models import Message
from tests.engine_support import number_on, running_simulator, work_burst
from tests.factories import (
    make_account,
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
)

pytestmark = pytest.mark.django_db

MEDIA_URL_TEMPLATE = [
    {"type": "HEADER", "format": "IMAGE", "example": {"header_handle": ["4::aW1n"]}},
    {"type": "BODY", "text": "Hi {{1}}, {{2}} off today.", "example": {"body_text": [["A", "5%"]]}},
    {
        "type": "BUTTONS",
        "buttons": [
            {"type": "QUICK_REPLY", "text": "Stop promotions"},
            {"type": "URL", "text": "Shop", "url": "https://shop.example/{{1}}"},
        ],
    },
]
NAMED_TEXT_HEADER = [
    {"type": "HEADER", "format": "TEXT", "text": "News from {{shop}}"},
    {"type": "BODY", "text": "Hi {{first_name}}"},
]
OTP_BUTTON = [
    {"type": "BODY", "text": "Your code"},
    {"type": "BUTTONS", "buttons": [{"type": "OTP", "otp_type": "COPY_CODE"}]},
]


def catalogue_template(
    account: BusinessAccount, name: str, components: list[dict[str, Any]], **fields: Any
) -> Template:
    """A template as the sync stores it (parsed from Meta's components)."""
    parsed = components_parse(components)
    return Template.objects.create(
        account=account,
        name=name,
        language="en_US",
        components=components,
        body_text=parsed.body_text,
        body_param_count=parsed.body_param_count,
        body_param_names=parsed.body_param_names,
        header_format=parsed.header_format,
        header_param=parsed.header_param,
        header_example=parsed.header_example,
        body_examples=parsed.body_examples,
        buttons=parsed.buttons,
        **fields,
    )


MEDIA_MAPPING = {
    "header": {"field": "photo"},
    "body": {"1": {"field": "name"}, "2": {"value": "10%"}},
    "buttons": {"1": {"field": "coupon"}},
}


# --- validation -------------------------------------------------------------------------------


def test_a_media_header_and_url_button_template_takes_exactly_its_params() -> None:
    template = catalogue_template(make_account(), "sale", MEDIA_URL_TEMPLATE)
    mapping_validate(template, MEDIA_MAPPING)
    # The quick reply payload is optional: mapping it is fine too.
    mapping_validate(
        template, {**MEDIA_MAPPING, "buttons": {"0": {"value": "STOP"}, "1": {"value": "x"}}}
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"header": None}, "has a image header: map 'header' to a link or media id"),
        ({"buttons": {}}, r"button\(s\) 1 need their url suffix mapped"),
        (
            {"buttons": {"1": {"value": "x"}, "2": {"value": "y"}}},
            r"no button 2 taking a parameter; it takes 0 \(quick reply payload, optional\), "
            r"1 \(url suffix\)",
        ),
        ({"header": {"value": "not a link"}}, "neither a link .* nor a media id"),
        ({"header": {"field": ""}}, "header: expected"),
        ({"footer": {"value": "x"}}, "unknown mapping sections: footer"),
    ],
)
def test_missing_unknown_or_malformed_params_are_refused(
    change: dict[str, Any], message: str
) -> None:
    template = catalogue_template(make_account(), "sale", MEDIA_URL_TEMPLATE)
    mapping = {**MEDIA_MAPPING, **change}
    mapping = {k: v for k, v in mapping.items() if v is not None}
    with pytest.raises(ParamMappingError, match=message):
        mapping_validate(template, mapping)


def test_a_header_for_a_template_without_one_is_refused() -> None:
    template = catalogue_template(make_account(), "plain", [{"type": "BODY", "text": "Hi {{1}}"}])
    with pytest.raises(ParamMappingError, match="has no header parameter"):
        mapping_validate(template, {"header": {"value": "x"}, "body": {"1": {"field": "name"}}})


def test_templates_with_parameters_campaigns_cannot_fill_are_refused() -> None:
    account = make_account()
    with pytest.raises(ParamMappingError, match="OTP buttons are not supported yet"):
        mapping_validate(catalogue_template(account, "code", OTP_BUTTON), {"body": {}})
    location = catalogue_template(
        account, "where", [{"type": "HEADER", "format": "LOCATION"}, {"type": "BODY", "text": "x"}]
    )
    with pytest.raises(ParamMappingError, match="location header"):
        mapping_validate(location, {"header": {"value": "x"}, "body": {}})


def test_the_service_words_the_error_for_the_operator() -> None:
    template = catalogue_template(make_account(), "sale", MEDIA_URL_TEMPLATE)
    with pytest.raises(ValidationError, match=r"body param\(s\) 2 of template 'sale' are not"):
        param_mapping_validate(
            template=template, param_mapping={**MEDIA_MAPPING, "body": {"1": {"field": "name"}}}
        )


def test_specs_from_the_command_line_build_every_section() -> None:
    mapping = param_mapping_from_specs(
        ["1=name", "2=const:10%"], header="photo", buttons=["1=const:SUMMER"]
    )
    assert mapping == {
        "body": {"1": {"field": "name"}, "2": {"value": "10%"}},
        "header": {"field": "photo"},
        "buttons": {"1": {"value": "SUMMER"}},
    }
    with pytest.raises(ValidationError, match="button index must be a number"):
        param_mapping_from_specs([], buttons=["shop=const:x"])


def test_campaign_create_validates_header_and_buttons() -> None:
    number = make_phone_number(phone_number_id="PN-T")
    catalogue_template(number.account, "sale", MEDIA_URL_TEMPLATE)
    make_contact_list(name="everyone")
    with pytest.raises(ValidationError, match="url suffix"):
        campaign_create(
            name="c",
            phone_number_id="PN-T",
            template_name="sale",
            list_names=["everyone"],
            param_mapping={**MEDIA_MAPPING, "buttons": {}},
        )
    campaign = campaign_create(
        name="c",
        phone_number_id="PN-T",
        template_name="sale",
        list_names=["everyone"],
        param_mapping=MEDIA_MAPPING,
    )
    assert campaign.param_mapping == MEDIA_MAPPING


# --- rendering ---------------------------------------------------------------------------------


def sql_render(template: Template, mapping: dict[str, Any], contact_id: int) -> Any:
    expr, args = params_sql(template, mapping)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {expr} FROM campaigns_contact AS c WHERE c.id = %s",  # noqa: S608
            [*args, contact_id],
        )
        value = cursor.fetchone()[0]
    return json.loads(value) if isinstance(value, str) else value


def test_the_launch_sql_renders_what_python_renders_in_the_client_format() -> None:
    account = make_account()
    contact = make_contact(name="Asha", attributes={"photo": "https://cdn.example/a.jpg"})
    contact.attributes["coupon"] = "A12"
    contact.save()
    template = catalogue_template(account, "sale", MEDIA_URL_TEMPLATE)
    rendered = params_render(template, MEDIA_MAPPING, contact)
    assert rendered == {
        "header": {"type": "image", "value": "https://cdn.example/a.jpg"},
        "body": ["Asha", "10%"],
        "buttons": [{"sub_type": "url", "index": 1, "value": "A12"}],
    }
    assert sql_render(template, MEDIA_MAPPING, contact.pk) == rendered
    # What the client makes of it: Meta's components.
    assert build_components(rendered) == [
        {
            "type": "header",
            "parameters": [{"type": "image", "image": {"link": "https://cdn.example/a.jpg"}}],
        },
        {
            "type": "body",
            "parameters": [{"type": "text", "text": "Asha"}, {"type": "text", "text": "10%"}],
        },
        {
            "type": "button",
            "sub_type": "url",
            "index": "1",
            "parameters": [{"type": "text", "text": "A12"}],
        },
    ]


def test_named_body_and_text_header_render_the_same_in_sql() -> None:
    contact = make_contact(name="Asha", attributes={"shop": "Lojas"})
    template = catalogue_template(make_account(), "news", NAMED_TEXT_HEADER)
    mapping = {"header": {"field": "shop"}, "body": {"first_name": {"field": "name"}}}
    mapping_validate(template, mapping)
    rendered = params_render(template, mapping, contact)
    # A named header carries its placeholder's name: Meta wants it as parameter_name.
    assert rendered == {
        "header": {"type": "text", "value": "Lojas", "name": "shop"},
        "body": {"first_name": "Asha"},
    }
    assert sql_render(template, mapping, contact.pk) == rendered


def test_a_quick_reply_payload_renders_in_index_order() -> None:
    contact = make_contact(name="Asha", attributes={"photo": "123456"})
    template = catalogue_template(make_account(), "sale", MEDIA_URL_TEMPLATE)
    mapping = {**MEDIA_MAPPING, "buttons": {"1": {"value": "B"}, "0": {"value": "STOP"}}}
    rendered = params_render(template, mapping, contact)
    assert rendered["buttons"] == [
        {"sub_type": "quick_reply", "index": 0, "value": "STOP"},
        {"sub_type": "url", "index": 1, "value": "B"},
    ]
    assert sql_render(template, mapping, contact.pk) == rendered
    # All digits: an uploaded media id, not a link.
    assert build_components(rendered)[0]["parameters"][0] == {
        "type": "image",
        "image": {"id": "123456"},
    }


# --- end to end: synced from the simulator, launched, sent, accepted ---------------------------


def audience(count: int, **attributes: Any) -> str:
    contact_list = make_contact_list()
    for i in range(count):
        make_contact(
            phone=f"+4917{i:08d}",
            name=f"P{i}",
            attributes={"photo": f"https://cdn.example/{i}.jpg", "coupon": f"C{i}", **attributes},
            contact_list=contact_list,
        )
    return contact_list.name


@pytest.mark.django_db(transaction=True)
@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_media_header_and_url_button_campaign_is_accepted_by_the_simulator() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=50)
        waba = number.account.waba_id
        sim.add_template(name="sale", language="en_US", components=MEDIA_URL_TEMPLATE, waba_id=waba)
        assert templates_sync(account=number.account).ok
        campaign = campaign_create(
            name="Sale",
            phone_number_id=number.phone_number_id,
            template_name="sale",
            list_names=[audience(4)],
            param_mapping=MEDIA_MAPPING,
        )
        summary = campaign_start(campaign=campaign)
        assert summary.pending == 4
        work_burst()
        statuses = list(Message.objects.filter(campaign=campaign).values_list("status", flat=True))
        assert statuses == ["sent"] * 4
        assert sim.stats()["accepted"] == 4
        sent = [
            json.loads(r["body"]) for r in sim.records(bodies=True) if r["to"] == "+491700000002"
        ]
        assert sent[0]["template"]["components"] == [
            {
                "type": "header",
                "parameters": [{"type": "image", "image": {"link": "https://cdn.example/2.jpg"}}],
            },
            {
                "type": "body",
                "parameters": [{"type": "text", "text": "P2"}, {"type": "text", "text": "10%"}],
            },
            {
                "type": "button",
                "sub_type": "url",
                "index": "1",
                "parameters": [{"type": "text", "text": "C2"}],
            },
        ]


@pytest.mark.django_db(transaction=True)
def test_named_params_and_text_header_are_accepted_by_the_simulator() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=50)
        sim.add_template(
            name="news",
            language="en_US",
            components=NAMED_TEXT_HEADER,
            waba_id=number.account.waba_id,
        )
        templates_sync(account=number.account)
        campaign = campaign_create(
            name="News",
            phone_number_id=number.phone_number_id,
            template_name="news",
            list_names=[audience(2, shop="Lojas")],
            param_mapping={"header": {"field": "shop"}, "body": {"first_name": {"field": "name"}}},
        )
        campaign_start(campaign=campaign)
        work_burst()
        assert sim.stats()["accepted"] == 2
        assert set(Message.objects.values_list("status", flat=True)) == {"sent"}


@pytest.mark.django_db(transaction=True)
def test_a_launch_is_refused_for_a_template_that_is_not_approved() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=50)
        sim.add_template(
            name="sale",
            language="en_US",
            components=MEDIA_URL_TEMPLATE,
            status="PENDING",
            waba_id=number.account.waba_id,
        )
        templates_sync(account=number.account)
        campaign = campaign_create(
            name="Early",
            phone_number_id=number.phone_number_id,
            template_name="sale",
            list_names=[audience(2)],
            param_mapping=MEDIA_MAPPING,
        )
    assert campaign.template.status == TemplateStatus.PENDING
    with pytest.raises(LaunchError, match="is PENDING, only APPROVED templates can be sent"):
        campaign_start(campaign=campaign)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.DRAFT
    assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_launch_is_refused_for_a_missing_param_or_a_missing_field_value() -> None:
    number = make_phone_number()
    template = catalogue_template(number.account, "sale", MEDIA_URL_TEMPLATE)
    contact_list = make_contact_list()
    make_contact(phone="+4917000000001", name="A", contact_list=contact_list)  # no photo
    # Saved without the URL suffix (e.g. the template changed after the campaign was made).
    campaign = make_campaign(
        phone_number=number,
        template=template,
        lists=[contact_list],
        param_mapping={**MEDIA_MAPPING, "buttons": {}},
    )
    with pytest.raises(LaunchError, match=r"button\(s\) 1 need their url suffix mapped"):
        campaign_start(campaign=campaign)
    campaign.param_mapping = MEDIA_MAPPING
    campaign.save()
    with pytest.raises(LaunchError, match="1 contact.s. have no value for mapped field 'coupon'"):
        campaign_start(campaign=campaign)
    assert not Message.objects.exists()


def test_the_slots_a_form_offers_are_exactly_the_templates_params() -> None:
    components = [
        *MEDIA_URL_TEMPLATE[:1],
        {"type": "BODY", "text": "Hi {{1}}, {{2}} off.", "example": {"body_text": [["Ana", "5%"]]}},
        MEDIA_URL_TEMPLATE[2],
    ]
    template = catalogue_template(make_account(), "sale", components)
    assert template_param_slots(template) == [
        {
            "path": ["header"],
            "label": "Header (image link or media id)",
            "section": "header",
            "key": None,
            "required": True,
            "kind": "image link or media id",
            "example": "4::aW1n",
        },
        {
            "path": ["body", "1"],
            "label": "Body {{1}}",
            "section": "body",
            "key": "1",
            "required": True,
            "kind": "text",
            "example": "Ana",
        },
        {
            "path": ["body", "2"],
            "label": "Body {{2}}",
            "section": "body",
            "key": "2",
            "required": True,
            "kind": "text",
            "example": "5%",
        },
        {
            "path": ["buttons", "0"],
            "label": "Button 0 (quick reply payload, optional)",
            "section": "buttons",
            "key": "0",
            "required": False,
            "kind": "quick reply payload, optional",
            "example": "",
        },
        {
            "path": ["buttons", "1"],
            "label": "Button 1 (url suffix)",
            "section": "buttons",
            "key": "1",
            "required": True,
            "kind": "url suffix",
            "example": "",
        },
    ]


def test_a_fallback_fills_a_missing_field_the_same_in_python_and_sql() -> None:
    template = catalogue_template(make_account(), "news", NAMED_TEXT_HEADER)
    mapping = {
        "header": {"field": "shop", "fallback": "our shop"},
        "body": {"first_name": {"field": "name", "fallback": "there"}},
    }
    mapping_validate(template, mapping)
    assert required_fields(mapping) == []
    for name, attributes, expected in (
        ("Asha", {"shop": "Lojas"}, ("Lojas", "Asha")),
        ("", {}, ("our shop", "there")),
        ("  ", {"shop": " "}, ("our shop", "there")),  # blank counts as missing
    ):
        contact = make_contact(name=name, attributes=attributes)
        rendered = params_render(template, mapping, contact)
        assert (rendered["header"]["value"], rendered["body"]["first_name"]) == expected
        assert sql_render(template, mapping, contact.pk) == rendered
    without = {"header": {"field": "shop"}, "body": {"first_name": {"field": "name"}}}
    assert required_fields(without) == ["name", "shop"]
    with pytest.raises(ParamMappingError):
        mapping_validate(template, {**mapping, "header": {"field": "shop", "other": "x"}})
