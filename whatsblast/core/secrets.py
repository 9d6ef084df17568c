"""Secrets that cannot be shown by accident: a value type and the model field that holds it.

A phone number's access token is needed in exactly one place, the ``Authorization`` header
of a Cloud API call. Everywhere else (admin pages read-only or not, history, error pages,
logs, ``repr`` in a traceback, a dumped fixture) it must not appear. Rather than rely on
every page remembering to hide it, the model attribute is a ``Secret``: its ``str`` and
``repr`` are a mask, and the value comes out only through ``reveal()``, which is easy to
find in a review.
"""

from __future__ import annotations

import hmac
from typing import Any

from django.db import models
from django.db.models.query_utils import DeferredAttribute

MASK = "•••••• (hidden)"


class Secret:
    """A string that prints as a mask; ``reveal()`` gives the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = str(value)

    def reveal(self) -> str:
        return self._value

    def __str__(self) -> str:
        return MASK if self._value else ""

    def __repr__(self) -> str:
        return f"Secret({MASK!r})"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            other = other._value
        if not isinstance(other, str):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other.encode())

    def __hash__(self) -> int:
        return hash(("Secret", self._value))


def secret_of(value: Any) -> Secret:
    return value if isinstance(value, Secret) else Secret("" if value is None else str(value))


class _SecretAttribute(DeferredAttribute):
    """Wraps whatever is assigned (a str from code, a form or the database) in a ``Secret``.

    Still loads a deferred value on first access, as Django's own attribute does.
    """

    def __set__(self, instance: Any, value: Any) -> None:
        instance.__dict__[self.field.attname] = secret_of(value)


class SecretField(models.TextField[Any, Any]):
    """A text column whose model attribute is a ``Secret``.

    Queries and saves store the revealed value; reading it back always yields a
    ``Secret``. ``value_to_string`` (dumpdata, serializers) gives the mask, never the value.
    """

    descriptor_class = _SecretAttribute

    def get_prep_value(self, value: Any) -> Any:
        # TextField's own preparation runs to_python, which wraps: unwrap after it.
        value = super().get_prep_value(value)
        return value.reveal() if isinstance(value, Secret) else value

    def to_python(self, value: Any) -> Any:
        return value if value is None else secret_of(value)

    def value_to_string(self, obj: Any) -> str:
        return str(self.value_from_object(obj))
