"""Typed environment readers refuse junk with a message naming the variable."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from whatsblast.core.env import env_bool, env_float, env_int, env_list, env_str, env_url


def test_bool_accepts_common_spellings() -> None:
    assert env_bool("X", False, environ={"X": "yes"}) is True
    assert env_bool("X", True, environ={"X": "0"}) is False
    assert env_bool("X", True, environ={}) is True


def test_bool_refuses_junk() -> None:
    with pytest.raises(ImproperlyConfigured, match="X='maybe' is not a boolean"):
        env_bool("X", False, environ={"X": "maybe"})


def test_int_refuses_junk_and_out_of_range() -> None:
    with pytest.raises(ImproperlyConfigured, match="not a whole number"):
        env_int("N", 1, environ={"N": "12abc"})
    with pytest.raises(ImproperlyConfigured, match="below the minimum"):
        env_int("N", 1, minimum=5, environ={"N": "2"})
    assert env_int("N", 7, environ={}) == 7


def test_float_refuses_nan_and_text() -> None:
    with pytest.raises(ImproperlyConfigured, match="not a number"):
        env_float("F", 1.0, environ={"F": "nan"})
    with pytest.raises(ImproperlyConfigured, match="not a number"):
        env_float("F", 1.0, environ={"F": "fast"})
    assert env_float("F", 1.0, environ={"F": "2.5"}) == 2.5


def test_required_string_missing_is_named() -> None:
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY must be set"):
        env_str("SECRET_KEY", environ={})


def test_secret_from_file(tmp_path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t\n")
    assert env_str("APP_SECRET", environ={"APP_SECRET_FILE": str(secret)}) == "s3cr3t"


def test_unreadable_secret_file_is_an_error(tmp_path) -> None:
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_str("APP_SECRET", environ={"APP_SECRET_FILE": str(tmp_path / "missing")})


def test_url_scheme_checked() -> None:
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL must be a URL"):
        env_url("DATABASE_URL", schemes=("postgres",), environ={"DATABASE_URL": "mysql://x/y"})
    assert env_url("DATABASE_URL", schemes=("postgres",), environ={}) is None


def test_list_splits_on_commas() -> None:
    assert env_list("H", ["a"], environ={"H": "a.com, b.com,,"}) == ["a.com", "b.com"]
    assert env_list("H", ["a"], environ={}) == ["a"]
