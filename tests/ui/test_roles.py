"""Roles: the groups the migration made, and every page and action refusing the wrong role."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from delivery.models import DeadLetter
from delivery.numbers import phone_number_pause
from tests.factories import make_contact_list, make_phone_number
from tests.ui.support import dead_message, message_status, role_user
from whatsblast.auth.roles import MARKETING, OPERATORS, SUPPORT, role_grant, roles_sync

pytestmark = pytest.mark.django_db


def perms(group: str) -> set[str]:
    return {
        f"{p.content_type.app_label}.{p.codename}"
        for p in Group.objects.get(name=group).permissions.select_related("content_type")
    }


@pytest.fixture
def upload_dir(tmp_path: Path, settings: Any) -> Path:
    settings.CONTACT_UPLOAD_DIR = tmp_path / "uploads"
    return settings.CONTACT_UPLOAD_DIR


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_migration_made_the_three_groups() -> None:
    marketing, support, operators = perms(MARKETING), perms(SUPPORT), perms(OPERATORS)

    assert {
        "campaigns.add_contactupload",
        "campaigns.add_contact",
        "campaigns.change_contactlist",
        "campaigns.view_template",
        "campaigns.add_campaign",
        "campaigns.change_campaign",
        "campaigns.launch_campaign",
    } <= marketing
    # Of the delivery app Marketing reads, and adds only conversions (their CSV upload).
    assert {p for p in marketing if p.startswith("delivery.") and "view_" not in p} == {
        "delivery.add_conversion"
    }
    assert "campaigns.change_template" not in marketing
    assert {
        "delivery.view_message",
        "delivery.view_deadletter",
        "delivery.requeue_deadletter",
        "delivery.discard_deadletter",
        "webhooks.view_webhookevent",
    } <= support
    assert all(p.split(".")[1].startswith("view_") or "deadletter" in p for p in support)
    every = {
        f"{p.content_type.app_label}.{p.codename}"
        for p in Permission.objects.filter(
            content_type__app_label__in=("campaigns", "delivery", "webhooks")
        ).select_related("content_type")
    }
    assert every <= operators
    assert {"campaigns.send_test_message", "delivery.add_apikey", "django_rq.admin"} <= operators
    assert not any(p.startswith("auth.") for p in operators)


def test_sync_puts_back_exactly_the_named_permissions(django_user_model: Any) -> None:
    support = Group.objects.get(name=SUPPORT)
    support.permissions.add(Permission.objects.get(codename="launch_campaign"))

    report = roles_sync()

    assert "campaigns.launch_campaign" not in perms(SUPPORT)
    assert report.missing == {}
    assert report.permissions[SUPPORT] == len(perms(SUPPORT))


def test_grant_makes_a_staff_member_of_the_role(django_user_model: Any) -> None:
    django_user_model.objects.create_user("newbie", password="x")

    role_grant(username="newbie", role=MARKETING)

    user = django_user_model.objects.get(username="newbie")
    assert user.is_staff and user.has_perm("campaigns.add_contactupload")
    with pytest.raises(ValidationError, match="unknown role"):
        role_grant(username="newbie", role="Admins")


def test_a_marketer_cannot_see_or_decide_dead_letters() -> None:
    letter = dead_message()
    marketer = client_for(role_user(MARKETING))

    assert marketer.get(reverse("admin:delivery_deadletter_changelist")).status_code == 403
    change = reverse("admin:delivery_deadletter_change", args=[letter.pk])
    assert marketer.get(change).status_code == 403
    for verb in ("requeue", "discard"):
        url = reverse(f"admin:delivery_deadletter_{verb}", args=[letter.pk])
        assert marketer.post(url, {"note": "x"}).status_code == 403
    assert message_status(letter) == "dead"
    assert DeadLetter.objects.get(pk=letter.pk).status == "open"


def test_support_reads_dead_letters_but_a_viewer_without_the_right_cannot_decide(
    django_user_model: Any,
) -> None:
    letter = dead_message()
    support = client_for(role_user(SUPPORT))
    page = support.get(reverse("admin:delivery_deadletter_changelist")).content.decode()
    assert "requeue_selected" in page and "discard_selected" in page

    viewer = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    readonly = client_for(viewer)
    page = readonly.get(reverse("admin:delivery_deadletter_changelist")).content.decode()
    assert "requeue_selected" not in page
    detail = readonly.get(reverse("admin:delivery_deadletter_change", args=[letter.pk]))
    assert 'id="requeue-form"' not in detail.content.decode()
    response = readonly.post(
        reverse("admin:delivery_deadletter_changelist"),
        {"action": "requeue_selected", "_selected_action": [letter.pk], "index": 0},
    )
    assert response.status_code == 200  # the list again: the action is not offered
    url = reverse("admin:delivery_deadletter_requeue", args=[letter.pk])
    assert readonly.post(url).status_code == 403
    assert message_status(letter) == "dead"


def test_support_cannot_upload_contacts_launch_or_create_campaigns(upload_dir: Path) -> None:
    contact_list = make_contact_list()
    support = client_for(role_user(SUPPORT))

    upload_url = reverse("admin:campaigns_contactlist_upload", args=[contact_list.pk])
    assert support.get(upload_url).status_code == 403
    response = support.post(upload_url, {"file": _csv_file()})
    assert response.status_code == 403
    assert not upload_dir.exists() or not any(upload_dir.iterdir())
    change = support.get(reverse("admin:campaigns_contactlist_change", args=[contact_list.pk]))
    assert "Upload contacts" not in change.content.decode()
    assert support.get(reverse("admin:campaigns_campaign_add")).status_code == 403
    user = role_user(SUPPORT, username="sam2")
    assert not user.has_perm("campaigns.launch_campaign")


def test_only_operators_resume_numbers_and_send_tests() -> None:
    number = phone_number_pause(
        phone_number=make_phone_number(),
        until=timezone.now() + timedelta(minutes=5),
        reason="Meta said too fast",
    )
    resume = reverse("admin:campaigns_phonenumber_resume", args=[number.pk])
    test_send = reverse("admin:campaigns_phonenumber_test_send", args=[number.pk])
    change = reverse("admin:campaigns_phonenumber_change", args=[number.pk])
    for role in (MARKETING, SUPPORT):
        client = client_for(role_user(role))
        page = client.get(change)
        assert page.status_code == 200  # both may look at a number
        assert 'id="resume-form"' not in page.content.decode()
        assert "Test send" not in page.content.decode()
        assert client.post(resume).status_code == 403
        assert client.get(test_send).status_code == 403
    operator = client_for(role_user(OPERATORS))
    page = operator.get(change).content.decode()
    assert 'id="resume-form"' in page and "Test send" in page
    assert operator.get(test_send).status_code == 200
    # A number that is not paused offers nothing to resume, even to an operator.
    running = make_phone_number()
    page = operator.get(reverse("admin:campaigns_phonenumber_change", args=[running.pk]))
    assert 'id="resume-form"' not in page.content.decode()


def test_a_marketer_uploads_and_reads_templates_but_cannot_change_them(upload_dir: Path) -> None:
    contact_list = make_contact_list()
    marketer = client_for(role_user(MARKETING))
    page = marketer.get(reverse("admin:campaigns_contactlist_change", args=[contact_list.pk]))
    assert "Upload contacts" in page.content.decode()
    assert marketer.get(reverse("admin:campaigns_template_changelist")).status_code == 200
    assert marketer.get(reverse("admin:campaigns_template_add")).status_code == 403
    assert marketer.get(reverse("admin:delivery_apikey_changelist")).status_code == 403
    assert marketer.get(reverse("admin:campaigns_businessaccount_changelist")).status_code == 403


def _csv_file() -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("c.csv", b"phone\n+5511999990001\n", content_type="text/csv")


def test_a_marketer_reads_the_rate_card_but_cannot_change_it() -> None:
    from decimal import Decimal

    from campaigns.models import RateCard

    card = RateCard.objects.create(
        country_prefix="+55", category="marketing", price=Decimal("0.0625"), currency="USD"
    )
    marketer = client_for(role_user(MARKETING))
    listing = marketer.get(reverse("admin:campaigns_ratecard_changelist"))
    assert listing.status_code == 200
    page = listing.content.decode()
    assert "+55" in page and "0.0625" in page
    assert 'name="form-0-price"' not in page  # no in-list editing for a reader
    change_url = reverse("admin:campaigns_ratecard_change", args=[card.pk])
    detail = marketer.get(change_url)
    assert detail.status_code == 200 and 'name="price"' not in detail.content.decode()
    assert marketer.get(reverse("admin:campaigns_ratecard_add")).status_code == 403
    refused = marketer.post(
        change_url,
        {"country_prefix": "+55", "category": "marketing", "price": "9", "currency": "USD"},
    )
    assert refused.status_code == 403
    card.refresh_from_db()
    assert card.price == Decimal("0.0625")
    # An operator edits it in the list.
    operator = client_for(role_user(OPERATORS))
    assert (
        'name="form-0-price"'
        in operator.get(reverse("admin:campaigns_ratecard_changelist")).content.decode()
    )
