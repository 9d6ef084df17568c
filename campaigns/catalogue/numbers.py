"""Registering business phone numbers under their WhatsApp Business Account."""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from django.db import transaction

from campaigns.models import BusinessAccount, PhoneNumber

logger = logging.getLogger(__name__)

DEFAULT_WABA_ID = "default"


def phone_number_add(
    *,
    phone_number_id: str,
    display_phone_number: str,
    access_token: str,
    waba_id: str | None = None,
    rate_per_second: int = 80,
    transactional_reserve: float = 0.2,
    api_base_url: str = "",
) -> PhoneNumber:
    """Register a business phone number under its WABA (``"default"`` when none is given)."""
    if not access_token.strip():
        raise ValidationError("the access token must not be blank")
    with transaction.atomic():
        account, _ = BusinessAccount.objects.get_or_create(waba_id=waba_id or DEFAULT_WABA_ID)
        number = PhoneNumber(
            phone_number_id=phone_number_id.strip(),
            display_phone_number=display_phone_number.strip(),
            account=account,
            access_token=access_token.strip(),
            rate_per_second=rate_per_second,
            transactional_reserve=transactional_reserve,
            api_base_url=api_base_url.strip(),
        )
        number.full_clean()
        number.save()
    logger.info("phone number %s added to WABA %s", number.phone_number_id, account.waba_id)
    return number


def phone_number_get(phone_number_id: str) -> PhoneNumber:
    """The number with this Meta id, or a ``ValidationError`` naming it."""
    try:
        return PhoneNumber.objects.select_related("account").get(phone_number_id=phone_number_id)
    except PhoneNumber.DoesNotExist:
        raise ValidationError(f"no phone number with id {phone_number_id!r}") from None
