"""``manage.py template add`` with a media header and buttons: Meta's components, read back
as a campaign reads a synced template."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from campaigns.catalogue.params import PARAM_NONE, PARAM_OPTIONAL, PARAM_REQUIRED
from campaigns.models import Template

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()


def add(*extra: str) -> Template:
    template_id = run(
        "template", "add", "--number", "PN1", "--name", "promo", "--language", "en_US",
        "--body", "Hi {{1}}", *extra,
    )  # fmt: skip
    return Template.objects.get(pk=int(template_id))


@pytest.fixture(autouse=True)
def number() -> None:
    run("phonenumber", "add", "--id", "PN1", "--display", "+15550001", "--token", "t")


def test_an_image_header_and_every_kind_of_button() -> None:
    template = add(
        "--header-image", "https://cdn.example.com/spring.jpg",
        "--quick-reply", "Yes please",
        "--quick-reply", "Stop promotions",
        "--url-button", "Track order", "https://shop.example.com/o/{{1}}",
        "https://shop.example.com/o/A1234",
        "--url-button", "Our shop", "https://shop.example.com",
        "--phone-button", "Call us", "+15550100",
    )  # fmt: skip
    assert template.components == [
        {
            "type": "HEADER",
            "format": "IMAGE",
            "example": {"header_handle": ["https://cdn.example.com/spring.jpg"]},
        },
        {"type": "BODY", "text": "Hi {{1}}"},
        {
            "type": "BUTTONS",
            "buttons": [
                {"type": "QUICK_REPLY", "text": "Yes please"},
                {"type": "QUICK_REPLY", "text": "Stop promotions"},
                {
                    "type": "URL",
                    "text": "Track order",
                    "url": "https://shop.example.com/o/{{1}}",
                    "example": ["https://shop.example.com/o/A1234"],
                },
                {"type": "URL", "text": "Our shop", "url": "https://shop.example.com"},
                {"type": "PHONE_NUMBER", "text": "Call us", "phone_number": "+15550100"},
            ],
        },
    ]
    assert (template.header_format, template.header_example) == (
        "IMAGE",
        "https://cdn.example.com/spring.jpg",
    )
    assert template.header_takes_param
    assert [(b["index"], b["type"], b["param"]) for b in template.buttons] == [
        (0, "QUICK_REPLY", PARAM_OPTIONAL),
        (1, "QUICK_REPLY", PARAM_OPTIONAL),
        (2, "URL", PARAM_REQUIRED),
        (3, "URL", PARAM_NONE),
        (4, "PHONE_NUMBER", PARAM_NONE),
    ]
    assert template.buttons[2]["example"] == "https://shop.example.com/o/A1234"


@pytest.mark.parametrize("media", ["video", "document"])
def test_a_video_or_document_header(media: str) -> None:
    template = add(f"--header-{media}", f"https://cdn.example.com/file.{media[:3]}")
    assert template.header_format == media.upper()
    assert template.components[0]["example"] == {
        "header_handle": [f"https://cdn.example.com/file.{media[:3]}"]
    }


def test_a_template_without_extras_keeps_a_body_only() -> None:
    template = add()
    assert template.components == [{"type": "BODY", "text": "Hi {{1}}"}]
    assert (template.header_format, template.buttons) == ("", [])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--header-image", "cdn/spring.jpg"), "must be an http\\(s\\) URL"),
        (("--url-button", "Track", "https://s.example/o/{{1}}"), "give an example URL"),
        (("--url-button", "Track", "https://s.example/{{1}}/o"), "at the end of its URL"),
        (("--url-button", "Track"), "--url-button takes TEXT URL"),
        (("--phone-button", "Call", "5550100"), "\\+country code and digits"),
        (("--quick-reply", "x" * 26), "1 to 25 characters"),
        (tuple(a for i in range(11) for a in ("--quick-reply", f"R{i}")), "at most 10 buttons"),
        (
            tuple(a for i in range(3) for a in ("--url-button", f"U{i}", "https://s.example")),
            "at most 2 URL buttons",
        ),
    ],
)
def test_refused_extras_are_named(extra: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        add(*extra)
    assert not Template.objects.exists()


def test_one_header_at_most(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(CommandError, match="not allowed with argument"):
        add("--header-image", "https://a.example/x.jpg", "--header-video", "https://a.example/v")
