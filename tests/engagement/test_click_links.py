"""A tracked link's destination filled in for one person (whatsblast/core/link_destinations.py)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest

from whatsblast.core.link_destinations import destination_url, link_destination_errors


def fill(destination: str, *, utm: bool = True, variant: str | None = None, **fields: str) -> str:
    return destination_url(
        destination,
        contact_fields=fields,
        campaign_name="Black Friday 2026!",
        variant_label=variant,
        utm=utm,
    )


def test_placeholders_take_the_contacts_fields_and_a_missing_one_is_empty() -> None:
    url = fill(
        "https://shop.example.com/{{city}}/sale?who={{name}}&tier={{tier}}",
        utm=False,
        city="Rio",
        name="Ana",
    )
    assert url == "https://shop.example.com/Rio/sale?who=Ana&tier="


def test_utm_parameters_are_added_after_the_query_and_the_fragment_stays_last() -> None:
    url = fill("https://shop.example.com/sale?c=1#deals", variant="B")
    assert url == (
        "https://shop.example.com/sale?c=1&utm_source=whatsapp&utm_medium=message"
        "&utm_campaign=black-friday-2026&utm_content=B#deals"
    )
    # No query at all: the parameters start one; no variant: no utm_content.
    assert fill("https://shop.example.com/") == (
        "https://shop.example.com/?utm_source=whatsapp&utm_medium=message"
        "&utm_campaign=black-friday-2026"
    )


def test_a_utm_key_the_destination_sets_itself_is_kept_and_not_repeated() -> None:
    url = fill("https://shop.example.com/?utm_source=newsletter&utm_campaign=", variant="A")
    pairs = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    assert pairs == [
        ("utm_source", "newsletter"),
        ("utm_campaign", ""),
        ("utm_medium", "message"),
        ("utm_content", "A"),
    ]


def test_without_utm_the_destination_is_only_filled() -> None:
    assert fill("https://shop.example.com/a?b=c#d", utm=False) == "https://shop.example.com/a?b=c#d"


def test_hostile_values_are_quoted_and_cannot_add_parameters_paths_or_fragments() -> None:
    url = fill(
        "https://shop.example.com/p/{{code}}?ref={{name}}",
        utm=False,
        code="../../admin?x=1#frag",
        name="a&utm_source=evil&next=https://evil.example/\r\nSet-Cookie: x",
    )
    parts = urlsplit(url)
    assert parts.netloc == "shop.example.com"
    assert parts.fragment == ""
    assert parts.path == "/p/..%2F..%2Fadmin%3Fx%3D1%23frag"
    assert parse_qsl(parts.query) == [
        ("ref", "a&utm_source=evil&next=https://evil.example/\r\nSet-Cookie: x")
    ]
    assert "\r" not in url and "\n" not in url and " " not in url


def test_non_ascii_values_and_hosts_give_an_ascii_url() -> None:
    url = fill("https://café.example/ü?c={{city}}", utm=False, city="São Paulo")
    assert url == "https://xn--caf-dma.example/%C3%BC?c=S%C3%A3o%20Paulo"
    assert url.isascii()


def test_a_campaign_name_without_latin_letters_keeps_its_own_slug() -> None:
    url = destination_url(
        "https://shop.example.com/",
        contact_fields={},
        campaign_name="تخفيضات الصيف",
        variant_label=None,
        utm=True,
    )
    assert dict(parse_qsl(urlsplit(url).query))["utm_campaign"] == "تخفيضات-الصيف"


@pytest.mark.parametrize(
    "destination",
    [
        "https://shop.example.com/",
        "http://shop.example.com:8080/x?y={{city}}#z",
        "https://shop.example.com/{{first.name}}/{{tier_2-b}}",
    ],
)
def test_good_destinations_have_no_errors(destination: str) -> None:
    assert link_destination_errors(destination) == []


@pytest.mark.parametrize(
    ("destination", "says"),
    [
        ("shop.example.com/sale", "must start with https://"),
        ("javascript:alert(1)", "must start with https://"),
        ("ftp://shop.example.com/", "must start with https://"),
        ("https:///sale", "must name a site"),
        ("https://{{sub}}.example.com/", "may not be part of the site's name"),
        ("https://shop.example.com/{{first name}}", "may only hold letters"),
        ("https://shop.example.com/{{cité}}", "may only hold letters"),
        ("https://shop.example.com/{{city", "not closed"),
        ("https://shop.example.com/city}}", "not closed"),
        ("https://shop.example.com/a b", "spaces"),
        ("https://shop.example.com/a\nb", "spaces"),
        ("https://shop.example.com:port/", "not a valid web address"),
        ("https://shop.example.com/" + "a" * 2000, "at most 2000"),
    ],
)
def test_bad_destinations_are_refused_with_a_plain_reason(destination: str, says: str) -> None:
    errors = link_destination_errors(destination)
    assert errors, destination
    assert any(says in error for error in errors), errors
