"""Template, number and account callbacks: statuses, limits, and the campaigns they stop."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from campaigns.models import BusinessAccount, PhoneNumber, QualityRating, Template, TemplateStatus
from campaigns.state import campaigns_pause_for
from webhooks.payloads import AccountChange, TemplateStatusChange

logger = logging.getLogger(__name__)

# Meta's template events → our template status. Events absent here (FLAGGED, IN_APPEAL,
# LOCKED, ARCHIVED, …) are logged and leave the template as it is.
TEMPLATE_STATUS_BY_EVENT: dict[str, str] = {
    "APPROVED": TemplateStatus.APPROVED,
    "REINSTATED": TemplateStatus.APPROVED,
    "UNARCHIVED": TemplateStatus.APPROVED,
    "PENDING": TemplateStatus.PENDING,
    "REJECTED": TemplateStatus.REJECTED,
    "PAUSED": TemplateStatus.PAUSED,
    "DISABLED": TemplateStatus.DISABLED,
    "DELETED": TemplateStatus.DELETED,
    "PENDING_DELETION": TemplateStatus.DELETED,
}
# A template in these states cannot send: every campaign using it is paused (with the
# reason) rather than failing its recipients one by one with 132015/132001.
TEMPLATE_STOPPING_EVENTS = frozenset({"PAUSED", "DISABLED", "REJECTED", "DELETED"})

# account_update events after which the account must not send business-initiated messages.
ACCOUNT_STOPPING_EVENTS = frozenset({"ACCOUNT_RESTRICTION", "ACCOUNT_VIOLATION", "DISABLED_UPDATE"})
# Meta's upgraded throughput (THROUGHPUT_UPGRADE): 1,000 messages per second.
UPGRADED_RATE_PER_SECOND = 1000


def language_normalise(code: str) -> str:
    """``en-US``, ``en_US`` and ``EN_us`` are one language: callbacks spell it with a hyphen."""
    return code.strip().replace("-", "_").lower()


def template_changes_apply(changes: Sequence[TemplateStatusChange]) -> tuple[int, int]:
    """Record template status callbacks; returns (templates updated, campaigns paused)."""
    updated = paused = 0
    for change in changes:
        templates = _templates_find(change)
        if not templates:
            logger.info(
                "template status %s for unknown template %s (%s)",
                change.event,
                change.name,
                change.language,
            )
            continue
        status = TEMPLATE_STATUS_BY_EVENT.get(change.event)
        if status is None:
            logger.info("template event %s for %s recorded only", change.event, change.name)
            continue
        reason = _template_reason(change)
        for template in templates:
            template.status = status
            template.status_reason = reason[:500]
            if not template.meta_template_id and change.template_id:
                template.meta_template_id = change.template_id
            template.save(
                update_fields=["status", "status_reason", "meta_template_id", "updated_at"]
            )
            updated += 1
            if change.event in TEMPLATE_STOPPING_EVENTS:
                paused += campaigns_pause_for(template=template, reason=reason)
    return updated, paused


def _templates_find(change: TemplateStatusChange) -> list[Template]:
    if change.template_id:
        by_id = list(Template.objects.filter(meta_template_id=change.template_id))
        if by_id:
            return by_id
    language = language_normalise(change.language)
    candidates = Template.objects.filter(account__waba_id=change.waba_id, name=change.name)
    return [t for t in candidates if language_normalise(t.language) == language]


def _template_reason(change: TemplateStatusChange) -> str:
    reason = f"template {change.name} ({change.language}) {change.event}"
    why = [part for part in (change.reason, change.other_title) if part and part != "NONE"]
    return reason + (f": {', '.join(why)}" if why else "")


def account_changes_apply(changes: Sequence[AccountChange]) -> tuple[int, int]:
    """Record number, capability and account callbacks; returns (changes applied, paused)."""
    applied = paused = 0
    for change in changes:
        account = BusinessAccount.objects.filter(waba_id=change.waba_id).first()
        if account is None:
            logger.info("%s for unknown account %s", change.field, change.waba_id)
            continue
        if change.limit_tier and change.limit_tier != account.messaging_limit_tier:
            account.messaging_limit_tier = change.limit_tier
            account.save(update_fields=["messaging_limit_tier", "updated_at"])
        if change.field == "phone_number_quality_update":
            _number_update(account, change)
        elif change.field == "account_update":
            paused += _account_update(account, change)
        applied += 1
    return applied, paused


def _number_update(account: BusinessAccount, change: AccountChange) -> None:
    number = _number_find(account, change.display_phone_number)
    if number is None:
        logger.info("quality update for unknown number %s", change.display_phone_number)
        return
    fields = []
    if change.event == "THROUGHPUT_UPGRADE" and number.rate_per_second < UPGRADED_RATE_PER_SECOND:
        number.rate_per_second = UPGRADED_RATE_PER_SECOND
        fields.append("rate_per_second")
    quality = change.quality_rating
    if not quality and change.event == "FLAGGED":  # legacy event: the number's quality is low
        quality = QualityRating.RED
    if quality in QualityRating.values and quality != number.quality_rating:
        number.quality_rating = quality
        fields.append("quality_rating")
    if fields:
        number.save(update_fields=[*fields, "updated_at"])


def _number_find(account: BusinessAccount, display: str) -> PhoneNumber | None:
    digits = re.sub(r"\D", "", display)
    if not digits:
        return None
    for number in account.phone_numbers.all():
        if re.sub(r"\D", "", number.display_phone_number) == digits:
            return number
    return None


def _account_update(account: BusinessAccount, change: AccountChange) -> int:
    if change.event not in ACCOUNT_STOPPING_EVENTS:
        logger.info("account_update %s for %s recorded only", change.event, account.waba_id)
        return 0
    if change.event == "DISABLED_UPDATE" and change.ban_state == "REINSTATE":
        return 0
    if change.event == "ACCOUNT_RESTRICTION" and change.restriction_types:
        # Only a restriction on messaging stops sends (not e.g. adding phone numbers).
        if not any("MESSAGING" in kind for kind in change.restriction_types):
            return 0
    detail = ", ".join(change.restriction_types) or change.ban_state
    reason = f"account {account.waba_id} {change.event}" + (f": {detail}" if detail else "")
    paused = campaigns_pause_for(account=account, reason=reason)
    logger.warning("%s; %s campaigns paused", reason, paused)
    return paused
