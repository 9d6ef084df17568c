"""The preview renders header, body and buttons as the recipient reads them."""

from __future__ import annotations

import pytest

from campaigns.catalogue.preview import message_preview
from campaigns.models import Contact
from tests.factories import make_account, make_template

pytestmark = pytest.mark.django_db

URL_BUTTON = {
    "index": 0,
    "type": "URL",
    "text": "Track",
    "url": "https://shop.example/t/{{1}}",
    "sub_type": "url",
    "param": "required",
    "example": "A1",
}
QUICK_REPLY = {
    "index": 1,
    "type": "QUICK_REPLY",
    "text": "Stop promotions",
    "sub_type": "quick_reply",
    "param": "optional",
}


def test_text_header_named_body_and_buttons() -> None:
    template = make_template(
        account=make_account(),
        body_text="Hello {{first_name}}, order {{order}} ships today.",
        body_param_count=0,
        body_param_names=["first_name", "order"],
        header_format="TEXT",
        header_text="Order {{1}}",
        header_param="1",
        buttons=[URL_BUTTON, QUICK_REPLY],
    )
    contact = Contact(phone="+5511900000001", name="Ana", attributes={"order": "A-77"})
    mapping = {
        "header": {"field": "order"},
        "body": {"first_name": {"field": "name"}, "order": {"field": "order"}},
        "buttons": {"0": {"field": "order"}},
    }
    preview = message_preview(template=template, mapping=mapping, contacts=[contact])
    assert preview["error"] is None
    assert [(s["section"], s["key"]) for s in preview["slots"]] == [
        ("header", None),
        ("body", "first_name"),
        ("body", "order"),
        ("buttons", "0"),
        ("buttons", "1"),
    ]
    sample = preview["samples"][0]
    assert sample["header"] == "Order A-77"
    assert sample["body"] == "Hello Ana, order A-77 ships today."
    assert sample["buttons"] == [
        {"text": "Track", "url": "https://shop.example/t/A-77", "kind": "url"},
        {"text": "Stop promotions", "url": "", "kind": "quick_reply"},
    ]


def test_media_header_and_a_value_that_looks_like_a_regex_group() -> None:
    template = make_template(
        account=make_account(),
        header_format="IMAGE",
        buttons=[URL_BUTTON],
    )
    mapping = {
        "header": {"value": "https://cdn.example/sale.jpg"},
        "body": {"1": {"value": r"\g<0> \1"}},
        "buttons": {"0": {"value": r"x\1"}},
    }
    contact = Contact(phone="+5511900000001", name="Ana")
    sample = message_preview(template=template, mapping=mapping, contacts=[contact])["samples"][0]
    assert sample["header"] == "[image] https://cdn.example/sale.jpg"
    assert sample["body"] == r"Hi \g<0> \1"
    assert sample["buttons"][0]["url"] == r"https://shop.example/t/x\1"


def test_junk_from_the_page_is_ignored_not_an_error() -> None:
    template = make_template(account=make_account())
    contact = Contact(phone="+5511900000001", name="Ana")
    for junk in (None, [], "x", {"body": "x"}, {"body": {"1": {"field": 3}}}):
        sample = message_preview(template=template, mapping=junk, contacts=[contact])
        assert sample["samples"][0]["body"] == "Hi {{1}}" and sample["error"]
