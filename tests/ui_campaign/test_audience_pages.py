"""The campaign form's preview follows the chosen segments as it follows the lists: their
first contacts are rendered and their uploaded columns offered as fields."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from delivery.segments.services import segment_save
from tests.factories import make_account, make_contact, make_contact_list, make_template
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING

pytestmark = pytest.mark.django_db


def test_the_preview_renders_a_segments_contacts_and_offers_its_columns() -> None:
    template = make_template(account=make_account(), name="hello", body_text="Hi {{1}}")
    listed = make_contact_list(name="customers")
    make_contact(phone="+5511900000001", name="Ana", contact_list=listed)
    make_contact(phone="+5511900000002", name="Bia", attributes={"city": "Recife", "tier": "1"})
    make_contact(phone="+5511900000003", name="Caio", attributes={"city": "Natal"})
    make_contact(phone="+5511900000004", name="Duda", opted_out_at="2026-01-01T00:00:00Z",
                 attributes={"city": "Recife"})  # fmt: skip
    segment = segment_save(name="has city", rules={"field": "city", "op": "exists", "value": True})
    broken = segment_save(name="staff", rules={"list": "customers"})
    broken.rules = {"list": "deleted"}
    broken.save()
    mia = Client()
    mia.force_login(role_user(MARKETING))
    mapping = json.dumps({"body": {"1": {"field": "name"}}})
    response = mia.get(
        reverse("admin:campaigns_campaign_preview"),
        {
            "template": template.pk,
            "lists": [listed.pk],
            "segments": [segment.pk, broken.pk],
            "mapping": mapping,
        },
    )
    assert response.status_code == 200
    data = response.json()
    # The list's and the segment's first contacts, opted-out Duda left out; the broken
    # segment changes nothing (the pre-flight names it).
    assert [s["name"] for s in data["samples"]] == ["Ana", "Bia", "Caio"]
    assert data["fields"] == ["name", "phone", "city", "tier"]


def test_marketing_marks_a_list_as_a_suppression_list_and_every_campaign_leaves_it_out() -> None:
    from campaigns.models import ContactList
    from delivery.campaigns.preflight import campaign_preflight
    from tests.factories import make_campaign

    staff = make_contact_list(name="staff")
    customers = make_contact_list(name="customers")
    make_contact(phone="+5511900000001", name="Ana", contact_list=customers)
    make_contact(phone="+5511900000002", name="Bia", contact_list=staff)
    mia = Client()
    mia.force_login(role_user(MARKETING))
    url = reverse("admin:campaigns_contactlist_change", args=[staff.pk])
    assert 'name="suppression"' in mia.get(url).content.decode()
    response = mia.post(url, {"name": "staff", "description": "", "suppression": "on"})
    assert response.status_code == 302
    assert ContactList.objects.get(pk=staff.pk).suppression
    listing = mia.get(reverse("admin:campaigns_contactlist_changelist") + "?suppression__exact=1")
    assert "staff" in listing.content.decode() and "customers" not in listing.content.decode()
    report = campaign_preflight(campaign=make_campaign(lists=[customers, staff]))
    assert report.left_out == {"suppression list staff": 1}
    assert report.audience == 1
