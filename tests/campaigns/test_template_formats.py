"""Meta's marketing formats, from the template Meta lists to the body the simulator takes.

Each published template (tests/fixtures/real/templates_listing: Meta's pages and pywa's
test data) is parsed as the sync parses it, mapped from the slots the campaign form
offers, rendered for a contact in Python and in the launch's SQL (the same JSON), built
into a send body, and checked by the simulator as Meta checks it. Then each rule the
formats add is shown to refuse what Meta would refuse, with a message naming the part.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from campaigns.catalogue.components import components_parse
from campaigns.catalogue.params import (
    ParamMappingError,
    TemplateParamsError,
    coupon_sources,
    mapped_fields,
    mapping_validate,
    params_render,
    params_sql,
    rendered_params_check,
    template_param_slots,
)
from campaigns.models import Contact, Template
from delivery.cloud.client import SendRequest, build_message_body
from delivery.simulator.config import TemplateSpec
from delivery.simulator.validate import Invalid, check_shape, check_template
from tests.campaigns.test_template_kinds import published
from tests.factories import make_account, make_contact
from whatsblast.core.template_values import offer_expiry_ms

pytestmark = pytest.mark.django_db

FORMATS = [
    "meta_doc_carousel_media_cards",
    "pywa_carousel_media_cards",
    "pywa_carousel_product_cards",
    "meta_doc_limited_time_offer",
    "pywa_limited_time_offer",
    "pywa_coupon_code",
    "pywa_catalog",
    "pywa_mpm",
    "pywa_spm_product_header",
]
TOMORROW = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def stored(name: str) -> Template:
    """The published template as the sync stores it."""
    data = published(name)
    parsed = components_parse(data["components"])
    assert parsed.problems == []
    return Template.objects.create(
        account=make_account(),
        name=data["name"],
        language=data["language"],
        category=data["category"],
        components=data["components"],
        body_text=parsed.body_text,
        body_param_count=parsed.body_param_count,
        body_param_names=parsed.body_param_names,
        body_examples=parsed.body_examples,
        header_format=parsed.header_format,
        header_param=parsed.header_param,
        header_example=parsed.header_example,
        buttons=parsed.buttons,
        cards=parsed.cards,
        offer=parsed.offer,
    )


def mapping_from_slots(template: Template) -> dict[str, Any]:
    """A mapping filled in slot by slot, as the form does: each slot read from a contact
    attribute named for its path, products and the catalogue as constants."""
    mapping: dict[str, Any] = {}
    for slot in template_param_slots(template):
        path = slot["path"]
        if path[0] == "catalog":
            source: dict[str, str] = {"value": "194836987003835"}
        elif path[-1] == "items":
            source = {"value": "SKU-1, SKU-2,SKU-3"}
        elif path[-1] == "title":
            source = {"value": "Your cart"}
        else:
            source = {"field": "_".join(str(step) for step in path)}
        node: Any = mapping
        for step, following in zip(path, [*path[1:], None], strict=True):
            if following is None:
                node[step] = source
            elif isinstance(node, list):
                while len(node) <= step:
                    node.append({} if isinstance(following, str) else [])
                node = node[step]
            else:
                node = node.setdefault(step, [] if isinstance(following, int) else {})
    return mapping


def contact_for(template: Template, mapping: dict[str, Any]) -> Contact:
    """A contact holding a well-formed value for every attribute the mapping reads."""
    attributes: dict[str, str] = {}
    kinds = {
        "_".join(str(step) for step in slot["path"]): slot["kind"]
        for slot in template_param_slots(template)
    }
    for field in mapped_fields(mapping):
        kind = kinds.get(field, "text")
        if "link" in kind:
            attributes[field] = "https://cdn.example/p.jpg"
        elif field == "offer":
            attributes[field] = TOMORROW
        elif kind == "coupon code":
            attributes[field] = "CARIBE25"
        else:
            attributes[field] = f"v-{field}"
    return make_contact(name="Ana", attributes=attributes)


def sql_render(template: Template, mapping: dict[str, Any], contact: Contact) -> Any:
    expr, args = params_sql(template, mapping)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {expr} FROM campaigns_contact AS c WHERE c.id = %s",  # noqa: S608
            [*args, contact.pk],
        )
        value = cursor.fetchone()[0]
    return json.loads(value) if isinstance(value, str) else value


def send_body(template: Template, params: dict[str, Any]) -> dict[str, Any]:
    return build_message_body(
        SendRequest(
            base_url="http://sim",
            phone_number_id="pn",
            access_token="t",
            to="+5511999990001",
            callback_data="",
            template_name=template.name,
            language=template.language,
            params=params,
        )
    )


def meta_checks(body: dict[str, Any], name: str) -> None:
    """The simulator's checks, as Meta makes them on arrival."""
    check_shape(body)
    spec = TemplateSpec.from_dict({"name": name, "language": "en_US", **published(name)})
    check_template(body, spec, now_ms=int(datetime.now(UTC).timestamp() * 1000))


@pytest.mark.parametrize("name", FORMATS)
def test_each_format_maps_renders_the_same_in_sql_and_is_taken_by_the_simulator(
    name: str,
) -> None:
    template = stored(name)
    mapping = mapping_from_slots(template)
    mapping_validate(template, mapping)
    contact = contact_for(template, mapping)
    rendered = params_render(template, mapping, contact)
    assert sql_render(template, mapping, contact) == rendered
    meta_checks(send_body(template, rendered), name)


def test_a_carousel_maps_every_card_and_sends_meta_s_carousel_component() -> None:
    template = stored("pywa_carousel_media_cards")
    assert [card["header_format"] for card in template.cards] == ["IMAGE"] * 3
    mapping = {
        "body": {"1": {"field": "name"}, "2": {"value": "30%"}, "3": {"field": "code"}},
        "cards": [
            {
                "header": {"value": f"https://cdn.example/{n}.jpg"},
                "buttons": {"0": {"value": f"more-{n}"}, "1": {"field": f"sku{n}"}},
            }
            for n in range(3)
        ],
    }
    mapping_validate(template, mapping)
    contact = make_contact(
        name="Ana", attributes={"code": "ANA30", "sku0": "BLUE_ELF", "sku1": "JADE", "sku2": "ZEB"}
    )
    rendered = params_render(template, mapping, contact)
    assert rendered["cards"][1] == {
        "header": {"type": "image", "value": "https://cdn.example/1.jpg"},
        "body": [],
        "buttons": [
            {"sub_type": "quick_reply", "index": 0, "value": "more-1"},
            {"sub_type": "url", "index": 1, "value": "JADE"},
        ],
    }
    assert sql_render(template, mapping, contact) == rendered
    body = send_body(template, rendered)
    components = body["template"]["components"]
    assert [c["type"] for c in components] == ["body", "carousel"]
    card = components[1]["cards"][1]
    assert card == {
        "card_index": 1,
        "components": [
            {
                "type": "header",
                "parameters": [{"type": "image", "image": {"link": "https://cdn.example/1.jpg"}}],
            },
            {
                "type": "button",
                "sub_type": "quick_reply",
                "index": "0",
                "parameters": [{"type": "payload", "payload": "more-1"}],
            },
            {
                "type": "button",
                "sub_type": "url",
                "index": "1",
                "parameters": [{"type": "text", "text": "JADE"}],
            },
        ],
    }
    meta_checks(body, "pywa_carousel_media_cards")
    # Meta refuses a carousel sent with fewer cards than approved (132012).
    components[1]["cards"].pop()
    with pytest.raises(Invalid) as refused:
        meta_checks(body, "pywa_carousel_media_cards")
    assert refused.value.code == 132012 and "number of cards (2) != expected (3)" in str(
        refused.value
    )


def test_an_offer_sends_its_expiry_in_milliseconds_and_a_past_one_is_refused() -> None:
    template = stored("pywa_limited_time_offer")
    assert template.offer == {"text": "Expiring offer!", "has_expiration": True}
    mapping = {
        "header": {"value": "https://cdn.example/offer.jpg"},
        "body": {"1": {"field": "name"}, "2": {"field": "code"}},
        "offer": {"value": "2027-01-31T23:59:00Z"},
        "buttons": {"0": {"field": "code"}, "1": {"value": "n3mtql"}},
    }
    mapping_validate(template, mapping)
    contact = make_contact(name="Bo", attributes={"code": "BO25"})
    body = send_body(template, params_render(template, mapping, contact))
    components = body["template"]["components"]
    assert [c["type"] for c in components] == [
        "header",
        "body",
        "limited_time_offer",
        "button",
        "button",
    ]
    assert components[2]["parameters"] == [
        {"type": "limited_time_offer", "limited_time_offer": {"expiration_time_ms": 1801439940000}}
    ]
    assert components[3]["parameters"] == [{"type": "coupon_code", "coupon_code": "BO25"}]
    meta_checks(body, "pywa_limited_time_offer")
    components[2]["parameters"][0]["limited_time_offer"]["expiration_time_ms"] = 1_600_000_000_000
    with pytest.raises(Invalid, match="must be in the future"):
        meta_checks(body, "pywa_limited_time_offer")


def test_a_multi_product_message_lists_each_recipients_own_products() -> None:
    template = stored("pywa_mpm")
    mapping = {
        "header": {"field": "name"},
        "body": {"1": {"value": "10OFF"}},
        "buttons": {"0": {"field": "first_sku"}},
        "sections": [{"title": {"value": "Your cart"}, "items": {"field": "cart"}}],
    }
    mapping_validate(template, mapping)
    contact = make_contact(name="Cy", attributes={"first_sku": "A1", "cart": "A1, B2,,C3"})
    rendered = params_render(template, mapping, contact)
    assert sql_render(template, mapping, contact) == rendered
    body = send_body(template, rendered)
    button = body["template"]["components"][-1]
    assert button["parameters"] == [
        {
            "type": "action",
            "action": {
                "thumbnail_product_retailer_id": "A1",
                "sections": [
                    {
                        "title": "Your cart",
                        "product_items": [
                            {"product_retailer_id": "A1"},
                            {"product_retailer_id": "B2"},
                            {"product_retailer_id": "C3"},
                        ],
                    }
                ],
            },
        }
    ]
    meta_checks(body, "pywa_mpm")


def test_product_headers_name_the_catalogue_and_the_sku() -> None:
    template = stored("pywa_carousel_product_cards")
    mapping = {
        "body": {"1": {"field": "name"}},
        "catalog": {"value": "194836987003835"},
        "cards": [{"header": {"value": "2lc20305pt"}}, {"header": {"field": "pick"}}],
    }
    mapping_validate(template, mapping)
    contact = make_contact(name="Di", attributes={"pick": "kn9wbvbeq2"})
    rendered = params_render(template, mapping, contact)
    assert sql_render(template, mapping, contact) == rendered
    body = send_body(template, rendered)
    cards = body["template"]["components"][1]["cards"]
    assert cards[1]["components"] == [
        {
            "type": "header",
            "parameters": [
                {
                    "type": "product",
                    "product": {
                        "product_retailer_id": "kn9wbvbeq2",
                        "catalog_id": "194836987003835",
                    },
                }
            ],
        }
    ]
    meta_checks(body, "pywa_carousel_product_cards")


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        ("pywa_carousel_media_cards", {"cards": []}, "carousel of 3 cards: map 'cards'"),
        ("pywa_carousel_media_cards", {"cards": None}, "carousel of 3 cards"),
        (
            "pywa_carousel_media_cards",
            {"cards": [{"header": {"value": "x.jpg"}, "buttons": {"1": {"value": "a"}}}] * 3},
            r"card 1: header image: 'x.jpg' is neither a link",
        ),
        (
            "pywa_carousel_media_cards",
            {"cards": [{"header": {"value": "https://a/b.jpg"}}] * 3},
            r"card 1: template .* button\(s\) 1 need their url suffix mapped",
        ),
        (
            "pywa_carousel_media_cards",
            {"cards": [{"header": {"value": "https://a/b.jpg"}, "footer": {}}] * 3},
            "card 1: unknown mapping sections: footer",
        ),
        ("pywa_limited_time_offer", {"offer": None}, "is a limited-time offer: map 'offer'"),
        ("pywa_limited_time_offer", {"offer": {"value": "1767225540"}}, "nor Unix milliseconds"),
        ("pywa_limited_time_offer", {"offer": {"value": "soon"}}, "'soon' is not a date"),
        (
            "pywa_limited_time_offer",
            {"buttons": {"0": {"value": "SIXTEEN-LETTERS!"}, "1": {"value": "x"}}},
            "a coupon code has 1 to 15 characters, 'SIXTEEN-LETTERS!' has 16",
        ),
        (
            "pywa_limited_time_offer",
            {"buttons": {"1": {"value": "x"}}},
            r"button\(s\) 0 need their coupon code mapped",
        ),
        ("pywa_mpm", {"sections": None}, "multi-product button: map 'sections'"),
        (
            "pywa_mpm",
            {"sections": [{"title": {"value": "t"}, "items": {"value": " , "}}]},
            "list at least one SKU",
        ),
        ("pywa_spm_product_header", {"catalog": None}, "map 'catalog' to the catalogue's id"),
        ("pywa_coupon_code", {"offer": {"value": TOMORROW}}, "has no expiring offer"),
        ("pywa_coupon_code", {"cards": []}, "has no carousel; remove 'cards'"),
        ("pywa_coupon_code", {"catalog": {"value": "1"}}, "shows no catalogue product"),
    ],
)
def test_a_mapping_that_does_not_fit_the_format_is_refused_naming_the_part(
    name: str, change: dict[str, Any], message: str
) -> None:
    template = stored(name)
    good = mapping_from_slots(template)
    mapping = {**good, **change}
    mapping = {key: value for key, value in mapping.items() if value is not None}
    with pytest.raises(ParamMappingError, match=message):
        mapping_validate(template, mapping)


def test_coupon_sources_find_every_copy_code_button() -> None:
    template = stored("pywa_coupon_code")
    mapping = mapping_from_slots(template)
    assert coupon_sources(template, mapping) == [{"field": "buttons_1"}]
    assert coupon_sources(stored("pywa_catalog"), {"body": {}}) == []


def test_a_flow_button_always_goes_out_with_a_token() -> None:
    components = [
        {"type": "BODY", "text": "Book your table"},
        {"type": "BUTTONS", "buttons": [{"type": "FLOW", "text": "Book", "flow_id": "1234"}]},
    ]
    parsed = components_parse(components)
    template = Template.objects.create(
        account=make_account(), name="book", language="en_US", components=components,
        body_text=parsed.body_text, buttons=parsed.buttons,
    )  # fmt: skip
    contact = make_contact(name="Ed", attributes={"ref": "ed-42"})
    unmapped = params_render(template, {"body": {}}, contact)
    assert unmapped["buttons"] == [{"sub_type": "flow", "index": 0, "value": "unused"}]
    mapped = params_render(template, {"body": {}, "buttons": {"0": {"field": "ref"}}}, contact)
    assert sql_render(template, {"body": {}, "buttons": {"0": {"field": "ref"}}}, contact) == mapped
    body = send_body(template, mapped)
    assert body["template"]["components"] == [
        {
            "type": "button",
            "sub_type": "flow",
            "index": "0",
            "parameters": [{"type": "action", "action": {"flow_token": "ed-42"}}],
        }
    ]
    spec = TemplateSpec.from_dict({"name": "book", "language": "en_US", "components": components})
    check_template(body, spec)


def test_formats_whose_parameters_only_a_campaign_renders_are_refused_by_the_api() -> None:
    with pytest.raises(TemplateParamsError, match="is a carousel, which this API does not send"):
        rendered_params_check(stored("pywa_carousel_media_cards"), {"body": ["a", "b", "c"]})
    coupon = stored("pywa_coupon_code")
    checked = rendered_params_check(
        coupon,
        {
            "body": ["25OFF", "25%"],
            "buttons": [{"sub_type": "copy_code", "index": 1, "value": "X"}],
        },
    )
    assert checked["buttons"] == [{"sub_type": "copy_code", "index": 1, "value": "X"}]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2027-01-31T23:59:00Z", 1801439940000),
        ("2027-01-31T23:59:00", 1801439940000),  # no zone: UTC
        ("2027-02-01T00:59:00+01:00", 1801439940000),
        ("1801439940000", 1801439940000),
        ("1801439940", None),  # seconds, not milliseconds
        ("next week", None),
        ("", None),
    ],
)
def test_offer_expiry_reads_a_date_and_time_or_milliseconds(
    text: str, expected: int | None
) -> None:
    assert offer_expiry_ms(text) == expected


def test_the_preview_shows_cards_an_offer_and_a_coupon_as_whatsapp_does() -> None:
    from campaigns.catalogue.preview import message_preview

    carousel = stored("pywa_carousel_media_cards")
    half_mapped = {
        "body": {"1": {"field": "name"}},
        "cards": [{"buttons": {"1": {"field": "sku"}}}],
    }
    contact = make_contact(name="Ana", attributes={"sku": "BLUE_ELF"})
    preview = message_preview(template=carousel, mapping=half_mapped, contacts=[contact])
    assert "body param(s) 2, 3 are not mapped" in preview["error"]
    sample = preview["samples"][0]
    assert sample["body"].startswith("Rare succulents for sale! Ana, add")
    assert "{{2}}" in sample["body"]  # not mapped yet: its placeholder shows
    assert len(sample["cards"]) == 3
    first = sample["cards"][0]
    assert first["header_format"] == "image" and first["media"] == "{{header}}"
    assert first["buttons"][1]["url"] == "https://www.luckyshrub.com/rare-succulents/BLUE_ELF"
    assert sample["cards"][1]["buttons"][1]["url"].endswith("/{{1}}")

    offer = stored("pywa_limited_time_offer")
    mapping = {
        "header": {"value": "https://cdn.example/o.jpg"},
        "body": {"1": {"field": "name"}, "2": {"field": "code"}},
        "offer": {"value": "2027-01-31T23:59:00Z"},
        "buttons": {"0": {"field": "code"}, "1": {"value": "n3mtql"}},
    }
    bo = make_contact(name="Bo", attributes={"code": "BO25"})
    sample = message_preview(template=offer, mapping=mapping, contacts=[bo])["samples"][0]
    assert sample["offer"] == {
        "text": "Expiring offer!",
        "expires": "2027-01-31T23:59:00Z",
        "expires_ms": 1801439940000,
    }
    assert sample["buttons"][0] == {
        "text": "Copy offer code",
        "url": "",
        "kind": "copy_code",
        "code": "BO25",
    }


def test_a_row_whose_carousel_is_not_parsed_yet_waits_for_the_sync() -> None:
    from campaigns.catalogue.sendable import template_unusable_reasons

    data = published("pywa_carousel_media_cards")
    row = Template(name="old", language="en_US", components=data["components"], cards=[])
    assert template_unusable_reasons(row) == [
        "its carousel cards are not read yet: sync the templates"
    ]
    assert template_unusable_reasons(stored("pywa_carousel_media_cards")) == []
    offer = published("pywa_limited_time_offer")
    row = Template(name="old", language="en_US", components=offer["components"], offer={})
    assert template_unusable_reasons(row) == [
        "its limited-time offer is not read yet: sync the templates"
    ]


def test_the_migration_reads_the_formats_of_rows_synced_before_it() -> None:
    from importlib import import_module

    from django.apps import apps

    migration = import_module("campaigns.migrations.0021_template_formats_reparse")
    data = published("pywa_carousel_media_cards")
    row = Template.objects.create(
        account=make_account(), name="old", language="en_US", components=data["components"]
    )
    assert row.cards == []
    migration.reparse(apps, None)
    row.refresh_from_db()
    assert len(row.cards) == 3 and row.cards[0]["header_format"] == "IMAGE"
    assert row.buttons == []  # the carousel's buttons are on its cards
