"""Login throttling: repeated failures for one username from one address are refused."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from whatsblast.auth.login_throttle import login_blocked_for

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/?next=/admin/"


@pytest.fixture
def staff_user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(
        "ana", password="right-horse-battery", is_staff=True
    )


def attempt(client: Client, password: str, username: str = "ana") -> Any:
    return client.post(LOGIN, {"username": username, "password": password})


def logged_in(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def test_the_right_password_is_refused_after_too_many_failures(
    staff_user: Any, settings: Any
) -> None:
    settings.LOGIN_THROTTLE_FAILURES = 3
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(3):
        page = attempt(client, "guess").content.decode()
        assert "Please enter the correct username and password" in page

    page = attempt(client, "right-horse-battery").content.decode()

    assert "Too many failed logins for this username from your address" in page
    assert "Try again in 15 minutes." in page
    assert not logged_in(client)
    assert 890 <= login_blocked_for(username="ANA", address="203.0.113.7") <= 900


def test_other_addresses_and_other_users_are_not_affected(
    staff_user: Any, django_user_model: Any, settings: Any
) -> None:
    settings.LOGIN_THROTTLE_FAILURES = 2
    django_user_model.objects.create_user("bo", password="another-long-one", is_staff=True)
    guesser = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(2):
        attempt(guesser, "guess")

    colleague = Client(REMOTE_ADDR="198.51.100.1")
    attempt(colleague, "right-horse-battery")
    assert logged_in(colleague)
    same_office = Client(REMOTE_ADDR="203.0.113.7")
    attempt(same_office, "another-long-one", username="bo")
    assert logged_in(same_office)


def test_a_success_before_the_limit_clears_the_count(staff_user: Any, settings: Any) -> None:
    settings.LOGIN_THROTTLE_FAILURES = 3
    client = Client(REMOTE_ADDR="203.0.113.7")
    attempt(client, "guess")
    attempt(client, "guess")
    attempt(client, "right-horse-battery")
    assert logged_in(client)
    client.logout()

    attempt(client, "guess")
    attempt(client, "guess")

    assert login_blocked_for(username="ana", address="203.0.113.7") == 0


def test_the_backend_refuses_a_throttled_pair_on_any_login_path(
    staff_user: Any, settings: Any, rf: Any
) -> None:
    from django.contrib.auth import authenticate

    settings.LOGIN_THROTTLE_FAILURES = 2
    request = rf.post("/", REMOTE_ADDR="203.0.113.9")
    assert authenticate(request, username="ana", password="x") is None
    assert authenticate(request, username="ana", password="y") is None

    assert authenticate(request, username="ana", password="right-horse-battery") is None
    other = rf.post("/", REMOTE_ADDR="203.0.113.10")
    assert authenticate(other, username="ana", password="right-horse-battery") == staff_user


def test_with_redis_stopped_a_wrong_password_is_refused_and_the_right_one_logs_in(
    staff_user: Any, stopped_redis: str, caplog: Any
) -> None:
    """The throttle fails open: a Redis outage never becomes an outage of every login."""
    client = Client(REMOTE_ADDR="203.0.113.7")

    wrong = attempt(client, "guess")

    assert wrong.status_code == 200
    assert "Please enter the correct username and password" in wrong.content.decode()
    assert "login throttle unavailable" in caplog.text
    right = attempt(client, "right-horse-battery")
    assert right.status_code == 302
    assert logged_in(client)
