"""Keys from `manage.py apikey` and from the admin: shown once, stored hashed, revocable."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import CommandError, call_command

from delivery.api.keys import api_key_authenticate, key_sha256
from delivery.models import ApiKey

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("apikey", *args, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue().strip()


def test_create_prints_the_key_once_and_stores_its_hash(number) -> None:
    key, note = run("create", "--name", "shop", "--number", number.phone_number_id)
    api_key = api_key_authenticate(raw_key=key)
    assert api_key is not None and api_key.name == "shop"
    assert list(api_key.phone_numbers.all()) == [number]
    assert api_key.key_sha256 == key_sha256(key)
    assert "shown only this once" in note and key not in note


def test_create_as_json_and_with_all_numbers_and_a_quota(number) -> None:
    out, _ = run("create", "--name", "ops", "--all-numbers", "--rps", "5", "--json")
    data = json.loads(out)
    api_key = ApiKey.objects.get(pk=data["id"])
    assert api_key.all_numbers and api_key.requests_per_second == 5
    assert data["key"].startswith(f"wb_{data['prefix']}_")
    assert api_key.scopes == ["send"]  # the default


def test_create_with_scopes(number) -> None:
    out, _ = run("create", "--name", "crm", "--scope", "contacts", "--scope", "read", "--json")
    api_key = ApiKey.objects.get(pk=json.loads(out)["id"])
    assert sorted(api_key.scopes) == ["contacts", "read"]
    assert json.loads(run("list", "--json")[0])[0]["scopes"] == ["contacts", "read"]
    with pytest.raises(CommandError):
        run("create", "--name", "x", "--all-numbers", "--scope", "everything")


@pytest.mark.parametrize(
    "args", [("--name", "x"), ("--name", "x", "--number", "nope"), ("--name", " ", "--all-numbers")]
)
def test_create_refuses_keys_without_a_valid_scope_or_name(number, args) -> None:
    with pytest.raises(CommandError):
        run("create", *args)
    assert not ApiKey.objects.exists()


def test_list_and_revoke(number) -> None:
    key, _ = run("create", "--name", "shop", "--number", number.phone_number_id)
    api_key = api_key_authenticate(raw_key=key)
    listing, _ = run("list", "--json")
    assert json.loads(listing)[0]["numbers"] == [number.phone_number_id]
    assert "key_sha256" not in listing and key not in listing
    assert run("revoke", str(api_key.pk))[0] == str(api_key.pk)
    assert api_key_authenticate(raw_key=key) is None
    assert "revoked" in run("list")[0]
    with pytest.raises(CommandError):
        run("revoke", "999999")


def test_the_admin_shows_a_new_key_once_in_a_message(admin_client, number) -> None:
    response = admin_client.post(
        "/admin/delivery/apikey/add/",
        {
            "name": "checkout",
            "scopes": ["send", "read"],
            "phone_numbers": [number.pk],
            "requests_per_second": "",
        },
        follow=True,
    )
    assert response.status_code == 200
    shown = [m.message for m in response.context["messages"]]
    keys = [k for m in shown for k in re.findall(r"wb_[0-9a-f]{10}_[\w-]+", m)]
    assert len(keys) == 1
    api_key = api_key_authenticate(raw_key=keys[0])
    assert api_key is not None and list(api_key.phone_numbers.all()) == [number]
    assert sorted(api_key.scopes) == ["read", "send"]
    change_page = admin_client.get(f"/admin/delivery/apikey/{api_key.pk}/change/")
    assert keys[0] not in change_page.content.decode()
    assert keys[0].split("_", 2)[2] not in change_page.content.decode()


def test_the_admin_refuses_a_key_without_scope(admin_client) -> None:
    response = admin_client.post(
        "/admin/delivery/apikey/add/", {"name": "nothing", "scopes": ["send"]}
    )
    assert response.status_code == 200  # the form again, with the error
    assert b"needs its phone numbers" in response.content
    assert not ApiKey.objects.exists()


def test_the_admin_revoke_action(admin_client, number) -> None:
    from delivery.api.keys import api_key_create

    api_key, raw = api_key_create(name="old", phone_number_ids=[number.phone_number_id])
    response = admin_client.post(
        "/admin/delivery/apikey/",
        {"action": "revoke_keys", "_selected_action": [api_key.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert api_key_authenticate(raw_key=raw) is None
    api_key.refresh_from_db()
    assert api_key.revoked_at is not None
