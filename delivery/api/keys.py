"""API keys for the transactional API: issue, authenticate, scope, revoke.

A key reads ``wb_<prefix>_<secret>``: the prefix (10 hex characters, public, unique) finds
the row, the SHA-256 of the whole key proves it. The key itself is returned once, by
``api_key_create``, and stored nowhere.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from campaigns.models import PhoneNumber
from delivery.models import ApiKey, ApiScope

KEY_SCHEME = "wb"
PREFIX_BYTES = 5  # 10 hex characters: a million keys collide with odds of about 1 in 2,000
SECRET_BYTES = 32
# last_used_at is a hint for operators, not an audit log: one write a minute per key at most.
LAST_USED_RESOLUTION = timedelta(seconds=60)
# Compared against when the prefix matches no key, so a miss costs what a hit costs.
_NO_KEY_SHA256 = "0" * 64


def key_sha256(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8", "surrogatepass")).hexdigest()


def api_key_issue(api_key: ApiKey) -> str:
    """Give an unsaved key its prefix and hash; return the raw key (the only copy)."""
    prefix = secrets.token_hex(PREFIX_BYTES)
    raw_key = f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(SECRET_BYTES)}"
    api_key.prefix = prefix
    api_key.key_sha256 = key_sha256(raw_key)
    return raw_key


def api_key_create(
    *,
    name: str,
    phone_number_ids: Sequence[str] = (),
    all_numbers: bool = False,
    requests_per_second: int | None = None,
    scopes: Sequence[str] = (ApiScope.SEND,),
) -> tuple[ApiKey, str]:
    """Create a key scoped to the given numbers (or all) and allowed ``scopes``; return it
    and the raw key. Numbers bound what the key may send and which campaigns it may run."""
    name = name.strip()
    unknown_scopes = sorted(set(scopes) - set(ApiScope.values))
    if unknown_scopes or not scopes:
        raise ValidationError(
            {
                "scopes": f"Give one or more of {', '.join(ApiScope.values)}; "
                f"unknown: {', '.join(unknown_scopes) or 'none given'}."
            }
        )
    if not name:
        raise ValidationError({"name": "A key needs a name."})
    if (
        not all_numbers
        and not phone_number_ids
        and {ApiScope.SEND, ApiScope.CAMPAIGNS} & set(scopes)
    ):
        raise ValidationError(
            {"phone_numbers": "Give the phone numbers the key may use, or all_numbers."}
        )
    if requests_per_second is not None and requests_per_second < 1:
        raise ValidationError({"requests_per_second": "Must be at least 1."})
    numbers = list(PhoneNumber.objects.filter(phone_number_id__in=set(phone_number_ids)))
    unknown = sorted(set(phone_number_ids) - {n.phone_number_id for n in numbers})
    if unknown:
        raise ValidationError(
            {"phone_numbers": f"Unknown phone number id(s): {', '.join(unknown)}."}
        )
    api_key = ApiKey(
        name=name,
        all_numbers=all_numbers,
        requests_per_second=requests_per_second,
        scopes=sorted(set(scopes)),
    )
    raw_key = api_key_issue(api_key)
    with transaction.atomic():
        api_key.save()
        api_key.phone_numbers.set(numbers)
    return api_key, raw_key


def api_key_revoke(*, api_key_id: int) -> ApiKey:
    """Revoke a key at once; revoking twice keeps the first time."""
    api_key = ApiKey.objects.get(pk=api_key_id)
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


def api_key_authenticate(*, raw_key: str) -> ApiKey | None:
    """The active key this raw key proves, or ``None`` (unknown, wrong or revoked)."""
    scheme, _, rest = raw_key.partition("_")
    prefix, _, secret = rest.partition("_")
    if scheme != KEY_SCHEME or not secret or len(prefix) != PREFIX_BYTES * 2:
        return None
    if not prefix.isascii() or not prefix.isalnum():
        return None
    api_key = ApiKey.objects.filter(prefix=prefix).first()
    expected = api_key.key_sha256 if api_key is not None else _NO_KEY_SHA256
    # Constant-time: the comparison leaks nothing about how much of the hash matched.
    if not hmac.compare_digest(key_sha256(raw_key), expected) or api_key is None:
        return None
    if api_key.revoked_at is not None:
        return None
    _touch(api_key)
    return api_key


def _touch(api_key: ApiKey) -> None:
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at >= LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now


def api_key_allows(*, api_key: ApiKey, phone_number_pk: int) -> bool:
    """Whether the key may send from (and read messages of) this phone number."""
    if api_key.all_numbers:
        return True
    return api_key.phone_numbers.filter(pk=phone_number_pk).exists()


def api_key_can(*, api_key: ApiKey, any_of: Sequence[str]) -> bool:
    """Whether the key holds one of ``any_of``: a reading endpoint accepts ``read`` or the
    scope that writes what it reads (a key that runs campaigns may read them)."""
    return bool(set(any_of) & set(api_key.scopes))
