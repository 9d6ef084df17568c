"""Param mapping: validation against the template and rendering for a contact."""

from __future__ import annotations

import pytest

from campaigns.catalogue.params import ParamMappingError, mapping_validate, params_render
from tests.factories import make_account, make_contact, make_template

pytestmark = pytest.mark.django_db


def test_every_positional_param_must_be_mapped() -> None:
    template = make_template(
        account=make_account(), body_text="Hi {{1}}, {{2}}", body_param_count=2
    )
    with pytest.raises(ParamMappingError, match="param.s. 2 are not mapped"):
        mapping_validate(template, {"body": {"1": {"field": "name"}}})


def test_unknown_params_are_refused() -> None:
    template = make_template(account=make_account())
    with pytest.raises(ParamMappingError, match="has no body param.s. 7"):
        mapping_validate(template, {"body": {"1": {"field": "name"}, "7": {"value": "x"}}})


def test_malformed_sources_are_refused() -> None:
    template = make_template(account=make_account())
    with pytest.raises(ParamMappingError, match="expected"):
        mapping_validate(template, {"body": {"1": "name"}})


def test_render_positional_and_named() -> None:
    account = make_account()
    contact = make_contact(name="Asha", attributes={"city": "Lyon"})
    positional = make_template(account=account, body_text="{{1}} {{2}}", body_param_count=2)
    mapping = {"body": {"1": {"field": "name"}, "2": {"field": "city"}}}
    assert params_render(positional, mapping, contact) == {"body": ["Asha", "Lyon"]}
    named = make_template(
        account=account, name="named", body_param_count=0, body_param_names=["first_name", "code"]
    )
    mapping = {"body": {"first_name": {"field": "name"}, "code": {"value": "SALE20"}}}
    assert params_render(named, mapping, contact) == {
        "body": {"first_name": "Asha", "code": "SALE20"}
    }
