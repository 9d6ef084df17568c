"""Array literals bound as one string come back from PostgreSQL element for element."""

from __future__ import annotations

import pytest
from django.db import connection

from whatsblast.core.db import array_literal, array_text, bound_cursor

pytestmark = pytest.mark.django_db

AWKWARD = ["plain", 'quote"d', "back\\slash", "com,ma", "{braces}", " spaced ", "NULL", "", "ünï"]


def test_a_text_array_literal_round_trips_every_awkward_element() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::text[]", [array_literal(map(array_text, AWKWARD))])
        assert cursor.fetchone()[0] == AWKWARD


def test_an_integer_array_literal_and_an_empty_one() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::bigint[], %s::text[]", ["{1,22,333}", array_literal([])])
        assert cursor.fetchone() == ([1, 22, 333], [])


def test_the_server_bound_cursor_is_logged_like_djangos_own(django_assert_num_queries) -> None:
    with django_assert_num_queries(1), bound_cursor() as cursor:
        cursor.execute("SELECT %b::bytea", [b"\x00\xff"])
        assert bytes(cursor.fetchone()[0]) == b"\x00\xff"
