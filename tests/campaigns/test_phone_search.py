"""A phone as people say it → the E.164 forms every admin search looks up exactly."""

from __future__ import annotations

import pytest

from campaigns.audience.phone_search import phone_search_candidates, search_regions
from campaigns.models import ContactUpload
from tests.factories import make_contact_list, make_phone_number

ANA = "+5511987654321"


@pytest.mark.parametrize(
    "typed",
    [
        "(11) 98765-4321",
        "11 98765 4321",
        "11987654321",
        "011 98765-4321",  # the national trunk prefix
        " (11)98765.4321 ",
    ],
)
def test_a_national_number_is_read_in_the_default_country(typed: str) -> None:
    assert phone_search_candidates(typed, regions=["BR"])[0] == ANA


@pytest.mark.parametrize(
    "typed",
    [
        "+55 11 98765-4321",
        "+55 (11) 98765-4321",
        "+5511987654321",
        "0055 11 98765 4321",
        "005511987654321",
        "5511987654321",
    ],
)
def test_an_international_number_is_read_whatever_the_default_country(typed: str) -> None:
    assert ANA in phone_search_candidates(typed, regions=["US"])
    assert ANA in phone_search_candidates(typed, regions=[])


def test_a_national_number_without_a_default_country_finds_no_brazilian() -> None:
    assert ANA not in phone_search_candidates("(11) 98765-4321", regions=[])
    # ...and is read in each default country where it is valid, in their order.
    assert phone_search_candidates("(11) 98765-4321", regions=["US", "BR"])[0] == ANA
    # A number valid in two of them (Curitiba's 41, San Francisco's 415) means either.
    both = phone_search_candidates("(415) 555-2671", regions=["BR", "US"])
    assert both[:2] == ["+554155552671", "+14155552671"]


def test_a_stored_number_phonenumbers_calls_invalid_is_still_found_as_typed() -> None:
    # Test ranges and new ranges: the digits with a "+", exactly.
    assert phone_search_candidates("+1 555 000 1234", regions=[]) == ["+15550001234"]


@pytest.mark.parametrize(
    "typed",
    [
        "",
        "   ",
        "Ana Souza",
        "12345",
        "wamid.HBgNNTUxMTk4NzY1NDMyMRUCABIYFDNB",
        "US.1349120865530",
        "98765-4321x",
        "+55 11 +98765",
        "ana@example.com",
        "#1234567",
    ],
)
def test_a_term_that_is_no_phone_gives_no_candidates(typed: str) -> None:
    assert phone_search_candidates(typed, regions=["BR"]) == []


@pytest.mark.django_db
def test_the_default_countries_are_the_uploads_and_the_business_numbers() -> None:
    assert search_regions() == []
    assert phone_search_candidates("(11) 98765-4321") == ["+11987654321"]  # digits only
    make_phone_number(display_phone_number="+351 912 345 678")  # Portugal
    ContactUpload.objects.create(
        contact_list=make_contact_list(), original_name="a.csv", stored_name="a", region="BR"
    )
    ContactUpload.objects.create(
        contact_list=make_contact_list(), original_name="b.csv", stored_name="b", region=""
    )
    assert search_regions() == ["BR", "PT"]
    assert phone_search_candidates("(11) 98765-4321")[0] == ANA
    assert phone_search_candidates("912 345 678")[0] == "+351912345678"
