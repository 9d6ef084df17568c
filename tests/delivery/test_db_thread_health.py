"""The send service's database threads: how often they check their connection, and what a
connection broken between two checks costs.

``CONN_HEALTH_CHECKS`` makes Django's check a ``SELECT 1`` round trip. Checked before every
call, it doubled the statements of every claim and flush; now a thread checks at most once
every ``DB_HEALTH_CHECK_EVERY_S``, and a connection that broke in between costs one failed
call, after which the next call opens a new one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import DatabaseError, connection, connections
from django.db.backends.postgresql.base import DatabaseWrapper

from campaigns.models import PhoneNumber
from delivery.engine import send_service

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def usability_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Every connection check the current thread makes, with its answer (the real check)."""
    connection.ensure_connection()  # open already: a new connection is not checked
    checks: list[bool] = []
    real_is_usable = DatabaseWrapper.is_usable

    def counted(self: Any) -> bool:
        usable = bool(real_is_usable(self))
        checks.append(usable)
        return usable

    monkeypatch.setattr(DatabaseWrapper, "is_usable", counted)
    monkeypatch.setattr(send_service._db_thread, "checked_at", float("-inf"), raising=False)
    yield checks


def _count_numbers() -> int:
    return PhoneNumber.objects.count()


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def test_a_thread_checks_its_connection_once_per_interval(usability_checks: list[bool]) -> None:
    for _ in range(5):
        assert send_service._db_run(_count_numbers) == 0

    assert usability_checks == [True]


def test_the_next_interval_checks_again(
    usability_checks: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    send_service._db_run(_count_numbers)
    monkeypatch.setattr(send_service, "DB_HEALTH_CHECK_EVERY_S", 0.0)
    send_service._db_run(_count_numbers)
    send_service._db_run(_count_numbers)

    assert usability_checks == [True, True, True]


def test_a_connection_broken_between_checks_fails_one_call_then_is_replaced(
    usability_checks: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    # However slow the machine, the calls below fall within one interval.
    monkeypatch.setattr(send_service, "DB_HEALTH_CHECK_EVERY_S", 3600.0)
    before = send_service._db_run(_backend_pid)
    other = connections.create_connection("default")  # a second session, same settings
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [before])
    finally:
        other.close()

    # Within the interval nothing checks: the call meets the broken connection and fails.
    with pytest.raises(DatabaseError):
        send_service._db_run(_count_numbers)
    # The failure closed it; the next call, still within the interval, opens a new one.
    after = send_service._db_run(_backend_pid)

    assert after != before
    assert send_service._db_run(_count_numbers) == 0
