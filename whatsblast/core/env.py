"""Typed readers for environment variables.

Every setting comes from the environment through one of these. A value that is present
but malformed raises ``ImproperlyConfigured`` naming the variable and what was expected,
so a typo in production fails at start instead of silently becoming a default.
Secrets may also be given as ``NAME_FILE`` (a path whose contents are the value), the
convention of container secret mounts.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import environ as django_environ
from django.core.exceptions import ImproperlyConfigured

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    source = os.environ if environ is None else environ
    value = source.get(name)
    if value is not None:
        return value.strip()
    file_path = source.get(f"{name}_FILE")
    if file_path:
        try:
            return Path(file_path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_path!r} cannot be read: {exc}") from exc
    return None


def env_str(
    name: str, default: str | None = None, *, environ: Mapping[str, str] | None = None
) -> str:
    value = _raw(name, environ)
    if value is None or value == "":
        if default is None:
            raise ImproperlyConfigured(f"{name} must be set")
        return default
    return value


def env_optional(name: str, *, environ: Mapping[str, str] | None = None) -> str | None:
    value = _raw(name, environ)
    return value or None


def env_bool(name: str, default: bool, *, environ: Mapping[str, str] | None = None) -> bool:
    value = _raw(name, environ)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={value!r} is not a boolean (use one of 1/0, true/false, yes/no, on/off)"
    )


def env_int(
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    value = _raw(name, environ)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a whole number") from None
    _check_range(name, number, minimum, maximum)
    return number


def env_float(
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> float:
    value = _raw(name, environ)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None
    if number != number:  # NaN
        raise ImproperlyConfigured(f"{name}={value!r} is not a number")
    _check_range(name, number, minimum, maximum)
    return number


def _check_range(name: str, number: float, minimum: float | None, maximum: float | None) -> None:
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum {minimum}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is above the maximum {maximum}")


def env_list(
    name: str, default: list[str], *, environ: Mapping[str, str] | None = None
) -> list[str]:
    value = _raw(name, environ)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_url(
    name: str,
    default: str | None = None,
    *,
    schemes: tuple[str, ...],
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """A URL whose scheme is one of ``schemes``; ``None`` when unset and no default."""
    value = _raw(name, environ)
    if not value:
        return default
    parsed = urlparse(value)
    if parsed.scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name} must be a URL starting with {' or '.join(s + '://' for s in schemes)}"
        )
    if parsed.scheme not in ("unix",) and not parsed.netloc and not parsed.path:
        raise ImproperlyConfigured(f"{name} has no host")
    return value


# The file of local settings: ./.env in the checkout unless WHATSBLAST_ENV_FILE names
# another (empty: none). `make demo` writes it so that `manage.py …` typed by hand next to
# the demo runs with the demo's DEBUG and SECRET_KEY.
ENV_FILE_VARIABLE = "WHATSBLAST_ENV_FILE"


def env_file_path(default: Path, *, environ: Mapping[str, str] | None = None) -> Path | None:
    """The local settings file: ``WHATSBLAST_ENV_FILE`` when set (empty: none), else
    ``default``."""
    source = os.environ if environ is None else environ
    named = source.get(ENV_FILE_VARIABLE)
    if named is None:
        return default
    return Path(named.strip()) if named.strip() else None


def env_file_load(path: Path | None) -> bool:
    """Put the ``NAME=value`` lines of ``path`` into the environment, each only where the
    environment does not set it already (what a process is given always wins). False when
    there is no such file. Production has none and sets its own environment, so a missing
    SECRET_KEY still stops it."""
    if path is None or not path.is_file():
        return False
    django_environ.Env.read_env(path, overwrite=False)
    return True


def env_file_write_development(path: Path) -> str:
    """Write a development settings file at ``path`` (DEBUG on, a new random SECRET_KEY)
    unless one is there; returns the SECRET_KEY it holds (empty when an existing file names
    none)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        path.write_text(
            "# Local development settings, written by `make demo`; read by every manage.py\n"
            "# run from this checkout (the environment wins over them). Never in production:\n"
            "# there DEBUG is off and SECRET_KEY is the deployment's own.\n"
            f"DEBUG=1\nSECRET_KEY={key}\n",
            encoding="utf-8",
        )
        path.chmod(0o600)
    return env_file_values(path).get("SECRET_KEY", "")


def env_file_values(path: Path) -> dict[str, str]:
    """The ``NAME=value`` lines of ``path`` as django-environ reads them (quotes, ``export``,
    comments), the environment untouched: the reader writes into its own dict."""
    values: dict[str, str] = {}
    reader: Any = type("_FileReader", (django_environ.Env,), {"ENVIRON": values})
    reader.read_env(path, overwrite=True)
    return values
