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
ACCOUNT_STOPPING_EVENTS = frozenset(
    {
        "ACCOUNT_RESTRICTION",
        "ACCOUNT_VIOLATION",
        "DISABLED_UPDATE",
        "ACCOUNT_DELETED",
        "ACCOUNT_OFFBOARDED",
    }
)
# Restrictions that stop a campaign: business-initiated messaging. Meta's others restrict
# replies to users (RESTRICTED_CUSTOMER_INITIATED_MESSAGING) or adding numbers
# (RESTRICTED_ADD_PHONE_NUMBER_ACTION); a campaign goes on under those.
CAMPAIGN_STOPPING_RESTRICTIONS = frozenset({"RESTRICTED_BIZ_INITIATED_MESSAGING"})
# A template quality this low makes sending it unsafe for the number: its campaigns pause.
UNSAFE_QUALITY = "RED"
# Meta's upgraded throughput (THROUGHPUT_UPGRADE): 1,000 messages per second.
UPGRADED_RATE_PER_SECOND = 1000


def language_normalise(code: str) -> str:
    """``en-US``, ``en_US`` and ``EN_us`` are one language: callbacks spell it with a hyphen."""
    return code.strip().replace("-", "_").lower()


def template_changes_apply(changes: Sequence[TemplateStatusChange]) -> tuple[int, int]:
    """Record template callbacks; returns (templates updated, campaigns paused)."""
    updated = paused = 0
    for change in changes:
        templates = _templates_find(change)
        if not templates:
            logger.info(
                "template %s %s for unknown template %s (%s)",
                change.kind,
                change.event,
                change.name,
                change.language,
            )
            continue
        if change.kind != "status":
            for template in templates:
                changed, stopped = _template_other_apply(template, change)
                updated += int(changed)
                paused += stopped
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
            template.rejected_reason = (
                (change.reason if change.reason != "NONE" else "")
                if change.event == "REJECTED"
                else ""
            )[:200]
            template.save(
                update_fields=[
                    "status",
                    "status_reason",
                    "meta_template_id",
                    "rejected_reason",
                    "updated_at",
                ]
            )
            updated += 1
            if change.event in TEMPLATE_STOPPING_EVENTS:
                paused += campaigns_pause_for(template=template, reason=reason)
    return updated, paused


def _template_other_apply(template: Template, change: TemplateStatusChange) -> tuple[bool, int]:
    """A category, quality or components change: (template changed, campaigns paused).

    Unsafe for a running campaign, so its campaigns pause with the reason: a template now
    billed and judged as marketing (users who stopped marketing will not get it, and the
    number's quality answers for it), a RED quality (Meta pauses the template next), and new
    wording or placeholders the campaign's mapping was not checked against.
    """
    label = f"template {template.name} ({template.language})"
    if change.kind == "category":
        if change.correct_category and not change.previous_category:
            # Announced: Meta will recategorise on category_update_timestamp. Nothing to do yet.
            logger.info("%s will become %s", label, change.correct_category)
            return False, 0
        new = change.new_category
        if not new or new == template.category:
            return False, 0
        old = template.category
        template.previous_category, template.category = old, new
        template.save(update_fields=["category", "previous_category", "updated_at"])
        if new == "MARKETING":
            return True, campaigns_pause_for(
                template=template, reason=f"{label} recategorised {old} -> {new} by Meta"
            )
        return True, 0
    if change.kind == "quality":
        if not change.new_quality or change.new_quality == template.quality_score:
            return False, 0
        template.quality_score = change.new_quality
        template.save(update_fields=["quality_score", "updated_at"])
        if change.new_quality == UNSAFE_QUALITY:
            reason = f"{label} quality {change.previous_quality or '?'} -> {change.new_quality}"
            return True, campaigns_pause_for(template=template, reason=reason)
        return True, 0
    # components: new wording is recorded; new placeholders pause its campaigns, whose
    # mapping was made for the old ones.
    if not change.body_text or change.body_text == template.body_text:
        return False, 0
    before = _placeholders(template.body_text)
    template.body_text = change.body_text
    template.save(update_fields=["body_text", "updated_at"])
    if _placeholders(change.body_text) == before:
        return True, 0
    return True, campaigns_pause_for(
        template=template, reason=f"{label} placeholders changed at Meta: check the mapping"
    )


def _placeholders(text: str) -> list[str]:
    return re.findall(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}", text)


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
        # Only a restriction on business-initiated messages stops campaigns.
        if not CAMPAIGN_STOPPING_RESTRICTIONS.intersection(change.restriction_types):
            logger.info("account %s restricted (%s): campaigns go on", account.waba_id, change)
            return 0
    detail = ", ".join(change.restriction_types) or change.ban_state
    reason = f"account {account.waba_id} {change.event}" + (f": {detail}" if detail else "")
    paused = campaigns_pause_for(account=account, reason=reason)
    logger.warning("%s; %s campaigns paused", reason, paused)
    return paused
