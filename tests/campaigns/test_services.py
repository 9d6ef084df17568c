"""phone_number_add, template_add, campaign_create and their validation."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from campaigns.catalogue.numbers import phone_number_add
from campaigns.catalogue.params import template_params_parse
from campaigns.catalogue.templates import template_add
from campaigns.drafts import campaign_create, param_mapping_from_specs, param_mapping_validate
from campaigns.models import BusinessAccount, CampaignStatus, TemplateStatus
from tests.factories import make_account, make_contact_list, make_phone_number, make_template

pytestmark = pytest.mark.django_db


def test_phone_number_add_uses_the_default_waba_when_none_given() -> None:
    number = phone_number_add(
        phone_number_id="PN1", display_phone_number="+15550001", access_token="tok"
    )
    assert number.account.waba_id == "default"
    assert (number.rate_per_second, number.transactional_reserve) == (80, 0.2)
    again = phone_number_add(
        phone_number_id="PN2", display_phone_number="+15550002", access_token="tok"
    )
    assert again.account == number.account
    assert BusinessAccount.objects.count() == 1


def test_phone_number_add_with_waba_and_limits() -> None:
    number = phone_number_add(
        phone_number_id="PN1",
        display_phone_number="+15550001",
        access_token="tok",
        waba_id="W1",
        rate_per_second=1000,
        transactional_reserve=0.5,
        api_base_url="http://127.0.0.1:9009",
    )
    number.refresh_from_db()
    assert number.account.waba_id == "W1"
    assert (number.rate_per_second, number.transactional_reserve) == (1000, 0.5)
    assert number.api_base_url == "http://127.0.0.1:9009"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rate_per_second": 1001}, "less than or equal to 1000"),
        ({"transactional_reserve": 0.95}, "less than or equal to 0.9"),
        ({"access_token": "  "}, "access token must not be blank"),
        ({"api_base_url": "not a url"}, "valid URL"),
    ],
)
def test_phone_number_add_refuses_bad_values(fields: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {
        "phone_number_id": "PN1",
        "display_phone_number": "+15550001",
        "access_token": "tok",
        **fields,
    }
    with pytest.raises(ValidationError, match=message):
        phone_number_add(**arguments)  # type: ignore[arg-type]


def test_phone_number_add_refuses_a_duplicate_id() -> None:
    make_phone_number(phone_number_id="PN1")
    with pytest.raises(ValidationError, match="already exists"):
        phone_number_add(phone_number_id="PN1", display_phone_number="+1", access_token="t")


@pytest.mark.parametrize(
    ("body", "parsed"),
    [
        ("", (0, [])),
        ("Hi {{1}}, use {{2}} before {{1}}", (2, [])),
        ("Hi {{ first_name }}, code {{code}}", (0, ["first_name", "code"])),
        ("No params {here}", (0, [])),
    ],
)
def test_template_params_parse(body: str, parsed: tuple[int, list[str]]) -> None:
    assert template_params_parse(body) == parsed


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{{1}} and {{name}}", "mixes positional"),
        ("{{1}} and {{3}}", "without gaps"),
        ("{{First Name}}", "invalid template param name"),
    ],
)
def test_template_params_parse_refuses(body: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        template_params_parse(body)


def test_template_add_parses_params_and_defaults_to_approved() -> None:
    number = make_phone_number(phone_number_id="PN1")
    template = template_add(
        phone_number_id="PN1", name="promo", language="en_US", body_text="Hi {{1}}, {{2}}"
    )
    assert template.account == number.account
    assert (template.body_param_count, template.body_param_names) == (2, [])
    assert (template.status, template.category) == (TemplateStatus.APPROVED, "MARKETING")
    named = template_add(
        phone_number_id="PN1",
        name="named",
        language="pt_BR",
        body_text="Oi {{nome}}",
        category="utility",
    )
    assert (named.body_param_count, named.body_param_names, named.category) == (
        0,
        ["nome"],
        "UTILITY",
    )


def test_template_add_refuses_unknown_number_and_duplicates() -> None:
    with pytest.raises(ValidationError, match="no phone number with id 'nope'"):
        template_add(phone_number_id="nope", name="t", language="en_US")
    make_phone_number(phone_number_id="PN1")
    template_add(phone_number_id="PN1", name="t", language="en_US")
    with pytest.raises(ValidationError, match="already exists"):
        template_add(phone_number_id="PN1", name="t", language="en_US")
    with pytest.raises(ValidationError, match="not a valid choice"):
        template_add(phone_number_id="PN1", name="u", language="en_US", category="SPAM")


def test_param_mapping_from_specs() -> None:
    assert param_mapping_from_specs(["1=name", "2=const:SALE20", "3 = city "]) == {
        "body": {"1": {"field": "name"}, "2": {"value": "SALE20"}, "3": {"field": "city"}}
    }
    assert param_mapping_from_specs([]) == {"body": {}}
    for bad in ("1", "=name", "1="):
        with pytest.raises(ValidationError, match="expected PARAM=FIELD"):
            param_mapping_from_specs([bad])
    with pytest.raises(ValidationError, match="mapped twice"):
        param_mapping_from_specs(["1=name", "1=city"])


def test_param_mapping_validate_named_template() -> None:
    template = make_template(
        account=make_account(),
        body_text="{{nome}}",
        body_param_count=0,
        body_param_names=["nome"],
    )
    param_mapping_validate(template=template, param_mapping={"body": {"nome": {"field": "name"}}})
    with pytest.raises(ValidationError, match="has no body param"):
        param_mapping_validate(template=template, param_mapping={"body": {"1": {"field": "x"}}})
    with pytest.raises(ValidationError, match="expected"):
        param_mapping_validate(template=template, param_mapping={"body": {"nome": {"f": "x"}}})


def campaign_setup() -> None:
    number = make_phone_number(phone_number_id="PN1")
    make_template(
        account=number.account, name="promo", body_text="Hi {{1}}, {{2}}", body_param_count=2
    )
    make_contact_list(name="vip")
    make_contact_list(name="new")


def test_campaign_create() -> None:
    campaign_setup()
    mapping = param_mapping_from_specs(["1=name", "2=const:SALE20"])
    campaign = campaign_create(
        name="Black Friday",
        phone_number_id="PN1",
        template_name="promo",
        list_names=["vip", "new"],
        param_mapping=mapping,
    )
    assert campaign.status == CampaignStatus.DRAFT
    assert campaign.param_mapping == mapping
    assert sorted(campaign.lists.values_list("name", flat=True)) == ["new", "vip"]
    assert (campaign.phone_number.phone_number_id, campaign.template.name) == ("PN1", "promo")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"param_mapping": {"body": {"1": {"field": "name"}}}}, r"param\(s\) 2 .* not mapped"),
        (
            {"param_mapping": param_mapping_from_specs(["1=a", "2=b", "3=c"])},
            r"no body param\(s\) 3; its params are: 1, 2",
        ),
        ({"list_names": ["vip", "ghost"]}, "no contact list named 'ghost'"),
        ({"list_names": []}, "at least one contact list"),
        ({"template_name": "other"}, "no template 'other'"),
        ({"phone_number_id": "PN9"}, "no phone number with id 'PN9'"),
        ({"name": " "}, "name must not be blank"),
    ],
)
def test_campaign_create_refuses(overrides: dict[str, object], message: str) -> None:
    campaign_setup()
    arguments: dict[str, object] = {
        "name": "C",
        "phone_number_id": "PN1",
        "template_name": "promo",
        "list_names": ["vip"],
        "param_mapping": param_mapping_from_specs(["1=name", "2=const:X"]),
        **overrides,
    }
    with pytest.raises(ValidationError, match=message):
        campaign_create(**arguments)  # type: ignore[arg-type]


def test_campaign_create_needs_a_language_when_the_name_is_ambiguous() -> None:
    campaign_setup()
    number_account = make_phone_number(phone_number_id="PN2").account
    make_template(account=number_account, name="hi", language="en_US", body_param_count=0)
    make_template(account=number_account, name="hi", language="pt_BR", body_param_count=0)
    make_contact_list(name="x")
    with pytest.raises(ValidationError, match="exists in en_US, pt_BR: choose a language"):
        campaign_create(name="C", phone_number_id="PN2", template_name="hi", list_names=["x"])
    campaign = campaign_create(
        name="C", phone_number_id="PN2", template_name="hi", list_names=["x"], language="pt_BR"
    )
    assert campaign.template.language == "pt_BR"


def test_campaign_create_refuses_a_rejected_template_and_another_wabas_template() -> None:
    campaign_setup()
    other = make_phone_number(phone_number_id="PN2")
    make_template(account=other.account, name="theirs", body_param_count=0)
    make_template(
        account=make_phone_number(phone_number_id="PN3").account,
        name="bad",
        body_param_count=0,
        status=TemplateStatus.REJECTED,
    )
    with pytest.raises(ValidationError, match="no template 'theirs'"):
        campaign_create(name="C", phone_number_id="PN1", template_name="theirs", list_names=["vip"])
    with pytest.raises(ValidationError, match="is REJECTED"):
        campaign_create(name="C", phone_number_id="PN3", template_name="bad", list_names=["vip"])
