"""Each kind's send body equal to Meta's documented example for the same inputs.

The examples are Meta's own (tests/fixtures/real/template_sends: developer pages and
Meta's OpenAPI spec; the fixtures README says where each came from). Each test stores the
template Meta's example sends (its published listing), maps it to the example's values,
renders and builds the body as a campaign does, and compares the ``components`` with
Meta's. Meta's examples write a button's ``index`` as a number or a string and its
``sub_type`` in either case (``COPY_CODE`` on one page, ``copy_code`` on another): the
comparison reads both as the same, and nothing else is loosened except where a test says
so.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from campaigns.catalogue.components import components_parse
from campaigns.catalogue.params import mapping_validate, params_render
from campaigns.models import Template
from delivery.cloud.client import MARKETING_MESSAGES, SendRequest, build_message_body
from tests.campaigns.test_template_kinds import published
from tests.factories import make_account, make_contact

pytestmark = pytest.mark.django_db

SENDS = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "template_sends"


def meta_example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SENDS / f"{name}.json").read_text())
    return data


def stored(components: list[dict[str, Any]], name: str) -> Template:
    parsed = components_parse(components)
    assert parsed.problems == []
    return Template.objects.create(
        account=make_account(), name=name, language="en_US", category="MARKETING",
        components=components, body_text=parsed.body_text,
        body_param_count=parsed.body_param_count, body_param_names=parsed.body_param_names,
        header_format=parsed.header_format, header_param=parsed.header_param,
        buttons=parsed.buttons, cards=parsed.cards, offer=parsed.offer,
    )  # fmt: skip


def ours(template: Template, mapping: dict[str, Any], **request: Any) -> dict[str, Any]:
    mapping_validate(template, mapping)
    params = params_render(template, mapping, make_contact(name="Pablo"))
    return build_message_body(
        SendRequest(
            base_url="http://meta", phone_number_id="pn", access_token="t",
            to="16505551234", callback_data="", template_name=template.name,
            language="en_US", params=params, **request,
        )
    )  # fmt: skip


def normal(components: Any) -> Any:
    """Meta's two ways of writing a button's index and sub_type read as one."""
    if isinstance(components, list):
        return [normal(item) for item in components]
    if isinstance(components, dict):
        out = {key: normal(value) for key, value in components.items()}
        if out.get("type") == "button":
            out["index"] = str(out.get("index"))
            out["sub_type"] = str(out.get("sub_type")).lower()
        return out
    return components


def v(text: str) -> dict[str, str]:
    return {"value": text}


def assert_same(template: Template, mapping: dict[str, Any], example: str) -> dict[str, Any]:
    body = ours(template, mapping)
    expected = meta_example(example)["template"]["components"]
    assert normal(body["template"]["components"]) == normal(expected)
    return body


def test_media_card_carousel() -> None:
    template = stored(published("pywa_carousel_media_cards")["components"], "carousel_v1")
    cards = [
        ("1558081531584829", "more-aloes", "blue-elf"),
        ("861236878885705", "more-crassulas", "buddhas-temple"),
        ("1587064918516321", "more-echeverias", "black-prince"),
    ]
    mapping = {
        "body": {"1": v("Pablo"), "2": v("20%"), "3": v("20OFF")},
        "cards": [
            {"header": v(media), "buttons": {"0": v(payload), "1": v(suffix)}}
            for media, payload, suffix in cards
        ],
    }
    assert_same(template, mapping, "meta_doc_send_carousel_media")


def test_product_card_carousel() -> None:
    # Meta's example sends three cards; pywa's published template of it has two of the same
    # shape, so the third repeats it (as many cards as approved, or Meta refuses the send).
    components = copy.deepcopy(published("pywa_carousel_product_cards")["components"])
    components[1]["cards"].append(copy.deepcopy(components[1]["cards"][0]))
    template = stored(components, "carousel_products")
    mapping = {
        "body": {"1": v("Pablo")},
        "catalog": v("194836987003835"),
        "cards": [{"header": v(sku)} for sku in ("vrpj01fvwp", "va2l5ioeat", "sqpjv0mgde")],
    }
    assert_same(template, mapping, "meta_doc_send_carousel_product")


def test_coupon_code() -> None:
    template = stored(published("pywa_coupon_code")["components"], "coupon")
    mapping = {"body": {"1": v("25OFF"), "2": v("25%")}, "buttons": {"1": v("25OFF")}}
    assert_same(template, mapping, "meta_doc_send_coupon_code")


def test_limited_time_offer() -> None:
    template = stored(published("meta_doc_limited_time_offer")["components"], "lto")
    mapping = {
        "header": v("1602186516975000"),
        "body": {"1": v("Pablo"), "2": v("CARIBE25")},
        "offer": v("1698562800000"),
        "buttons": {"0": v("CARIBE25"), "1": v("n3mtql")},
    }
    body = ours(template, mapping)
    expected = copy.deepcopy(meta_example("meta_doc_send_limited_time_offer"))
    offer = expected["template"]["components"][2]["parameters"][0]["limited_time_offer"]
    # Meta's example value (1209600000) is 14 days in milliseconds, a moment in January 1970
    # as the Unix time in milliseconds the same page defines; ours is a real expiry, the
    # page's own sample for the field, and is compared as that.
    assert offer["expiration_time_ms"] == 1209600000
    offer["expiration_time_ms"] = 1698562800000
    assert normal(body["template"]["components"]) == normal(expected["template"]["components"])


def test_catalogue_button() -> None:
    template = stored(published("pywa_catalog")["components"], "catalog")
    mapping = {
        "body": {"1": v("100"), "2": v("400"), "3": v("3")},
        "buttons": {"0": v("2lc20305pt")},
    }
    assert_same(template, mapping, "meta_doc_send_catalog")
    assert normal(meta_example("spec_send_catalog")["template"]["components"]) == normal(
        meta_example("meta_doc_send_catalog")["template"]["components"]
    )


def test_multi_product_button() -> None:
    template = stored(published("pywa_mpm")["components"], "abandoned_cart")
    mapping = {
        "header": v("Pablo"),
        "body": {"1": v("10OFF")},
        "buttons": {"0": v("2lc20305pt")},
        "sections": [
            {"title": v("Popular Bundles"), "items": v("2lc20305pt, nseiw1x3ch")},
            {"title": v("Premium Packages"), "items": v("n6k6x0y7oe")},
        ],
    }
    assert_same(template, mapping, "meta_doc_send_mpm")


def test_single_product_with_named_params() -> None:
    # Meta's example sends named body params ("spm_template_named_params"); pywa's
    # published single-product template is the same with positional ones.
    components = copy.deepcopy(published("pywa_spm_product_header")["components"])
    components[1] = {"type": "BODY", "text": "Use code {{code}} to get {{percent}} off!"}
    template = stored(components, "spm_named")
    mapping = {
        "header": v("nqryix03ez"),
        "catalog": v("194836987003835"),
        "body": {"code": v("25OFF"), "percent": v("25%")},
    }
    assert_same(template, mapping, "meta_doc_send_spm_product_header")


def test_flow_button() -> None:
    components = [
        {"type": "BODY", "text": "Book your table"},
        {"type": "BUTTONS", "buttons": [{"type": "FLOW", "text": "Book", "flow_id": "1"}]},
    ]
    template = stored(components, "flow")
    body = ours(template, {"body": {}, "buttons": {"0": v("<FLOW_TOKEN>")}})
    expected = copy.deepcopy(meta_example("spec_send_flow_button")["template"]["components"])
    # flow_action_data (the Flow's first screen data) is optional and not sent here.
    del expected[0]["parameters"][0]["action"]["flow_action_data"]
    assert normal(body["template"]["components"]) == normal(expected)


def test_marketing_messages_api_fields() -> None:
    template = stored([{"type": "BODY", "text": "Welcome!"}], "welcome_offer")
    body = ours(
        template,
        {"body": {}},
        endpoint=MARKETING_MESSAGES,
        product_policy="CLOUD_API_FALLBACK",
        activity_sharing=True,
    )
    expected = meta_example("spec_marketing_messages_product_policy_fallback")
    for key in ("messaging_product", "recipient_type", "type", "product_policy"):
        assert body[key] == expected[key], key
    assert body["message_activity_sharing"] is expected["message_activity_sharing"] is True
    assert "components" not in body["template"] and "components" not in expected["template"]
    strict = meta_example("spec_marketing_messages_parameterized_strict")
    assert strict["product_policy"] == "STRICT"
