"""A cast for the campaign pages: a marketer who may launch, a viewer who may only look."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.test import Client

from campaigns.models import Campaign, ContactList, Template
from tests.factories import (
    make_account,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)


def launch_permission() -> Permission:
    """campaigns.launch_campaign (whatsblast.auth.roles creates it; flushes between transactional
    tests remove it, so it is made again here)."""
    content_type = ContentType.objects.get_for_model(Campaign)
    permission, _ = Permission.objects.get_or_create(
        content_type=content_type,
        codename="launch_campaign",
        defaults={"name": "Can launch campaigns"},
    )
    return permission


def staff_client(django_user_model: Any, username: str, *codenames: str) -> Client:
    user = django_user_model.objects.create_user(username, password="pw", is_staff=True)
    content_type = ContentType.objects.get_for_model(Campaign)
    for codename in codenames:
        if codename == "launch_campaign":
            user.user_permissions.add(launch_permission())
        else:
            user.user_permissions.add(
                Permission.objects.get(content_type=content_type, codename=codename)
            )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def marketer(django_user_model: Any) -> Client:
    return staff_client(
        django_user_model,
        "mara",
        "view_campaign",
        "add_campaign",
        "change_campaign",
        "launch_campaign",
    )


@pytest.fixture
def viewer(django_user_model: Any) -> Client:
    """Sees campaigns (support does), may not launch or change their course."""
    return staff_client(
        django_user_model, "vic", "view_campaign", "add_campaign", "change_campaign"
    )


@pytest.fixture
def setup() -> dict[str, Any]:
    """A number, an approved two-parameter template and a list of three contacts."""
    account = make_account(messaging_limit_tier="TIER_UNLIMITED")
    number = make_phone_number(account=account, rate_per_second=80)
    template: Template = make_template(
        account=account,
        name="spring_sale",
        body_text="Hi {{1}}, your code is {{2}}.",
        body_param_count=2,
        body_examples=["Asha", "SPRING10"],
    )
    contacts: ContactList = make_contact_list(name="customers")
    for phone, name, coupon in (
        ("+5511900000001", "Ana", "A1"),
        ("+5511900000002", "Bruno", "B2"),
        ("+5511900000003", "Carla", "C3"),
    ):
        make_contact(phone=phone, name=name, attributes={"coupon": coupon}, contact_list=contacts)
    return {"account": account, "number": number, "template": template, "list": contacts}


MAPPING = {"body": {"1": {"field": "name"}, "2": {"field": "coupon"}}}
