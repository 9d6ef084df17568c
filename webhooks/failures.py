"""What a failure Meta reports after the fact means beyond its message.

A send can be accepted and fail later: the ``failed`` status callback (and a value-level
``errors[]`` item, which names no message) carries the same codes as a synchronous error,
and means the same: 131050 is an opt-out, a paused template stops its campaigns, a locked
or unpaid account stops all of them, 130429/131048 slow the number, 131049 (Meta's per-user
marketing limit) holds the person 24 h and sends a journey's message again then. Each rule
below is a row of docs/webhooks.md.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from campaigns.models import BusinessAccount, PhoneNumber, Template, TemplateStatus
from campaigns.state import campaigns_pause_for
from delivery.consent import contacts_stop
from delivery.marketing_holds import MARKETING_LIMIT_CODE, marketing_holds_record
from delivery.messages import NewlyFailed
from delivery.numbers import phone_numbers_throttle
from journeys.whatsapp import journey_sends_limited
from webhooks.payloads import AsyncErrorItem

logger = logging.getLogger(__name__)

OPTED_OUT_CODE = 131050
OPT_OUT_REASON = "opted out of marketing (131050)"
# The template cannot send: pause its campaigns (and record it on the template).
TEMPLATE_CODES: dict[int, str] = {
    132015: TemplateStatus.PAUSED,  # paused for low quality
    132016: TemplateStatus.DISABLED,  # disabled for low quality
}
# The account cannot send: pause every campaign of the account.
ACCOUNT_CODES = frozenset(
    {
        131031,  # account locked
        368,  # temporarily blocked for policy violations
        131042,  # payment / eligibility problem
    }
)
# The campaign is misconfigured for everyone: pause it.
CAMPAIGN_CODES = frozenset({131030})  # recipient not in the test number's allowed list
# The number sends too fast: slow it (True: the spam limit, held down for longer).
THROTTLE_CODES: dict[int, bool] = {130429: False, 131048: True}


@dataclass
class FailureReport:
    opted_out: int = 0
    campaigns_paused: int = 0
    numbers_slowed: int = 0
    journey_sends_again: int = 0


def failures_apply(*, failed: Sequence[NewlyFailed], now: datetime) -> FailureReport:
    """Apply the effects of messages a callback has just marked failed."""
    report = FailureReport()
    if not failed:
        return report
    stops = [f.contact_id for f in failed if f.error_code == OPTED_OUT_CODE and f.contact_id]
    report.opted_out = contacts_stop(contact_ids=stops, at=now, reason=OPT_OUT_REASON)
    limited = [f for f in failed if f.error_code == MARKETING_LIMIT_CODE and f.contact_id]
    if limited:
        # Meta's per-user marketing limit: the person is held 24 h; a journey's send goes
        # again then instead of failing (journeys.whatsapp).
        marketing_holds_record([(f.contact_id or 0, now, f.message_id) for f in limited])
        report.journey_sends_again = journey_sends_limited(
            message_ids=[f.message_id for f in limited], now=now
        )
    for code, status in TEMPLATE_CODES.items():
        template_ids = {f.template_id for f in failed if f.error_code == code and f.template_id}
        for template in Template.objects.filter(pk__in=template_ids):
            reason = f"template {template.name} ({template.language}) {status}: Meta error {code}"
            template.status, template.status_reason = status, reason[:500]
            template.save(update_fields=["status", "status_reason", "updated_at"])
            report.campaigns_paused += campaigns_pause_for(template=template, reason=reason)
    number_pks = {f.phone_number_id for f in failed if f.error_code in ACCOUNT_CODES}
    codes = Counter(f.error_code for f in failed if f.error_code in ACCOUNT_CODES)
    for account in BusinessAccount.objects.filter(phone_numbers__pk__in=number_pks).distinct():
        reason = f"account {account.waba_id} cannot send: Meta error {_codes(codes)}"
        report.campaigns_paused += campaigns_pause_for(account=account, reason=reason)
    broken = [f for f in failed if f.error_code in CAMPAIGN_CODES and f.campaign_id is not None]
    for f in broken:
        reason = f"Cloud API error {f.error_code}: {f.error_title}"
        report.campaigns_paused += campaigns_pause_for(
            campaign_ids=[f.campaign_id or 0], reason=reason
        )
    throttled = {f.phone_number_id: f.error_code for f in failed if f.error_code in THROTTLE_CODES}
    if throttled:
        meta_ids = dict(
            PhoneNumber.objects.filter(pk__in=list(throttled)).values_list("pk", "phone_number_id")
        )
        report.numbers_slowed = phone_numbers_throttle(
            phone_number_ids={
                meta_ids[pk]: THROTTLE_CODES[code or 0] for pk, code in throttled.items()
            }
        )
    if report.campaigns_paused or report.numbers_slowed:
        logger.warning("failed callbacks: %s", report)
    return report


def async_errors_apply(*, errors: Sequence[AsyncErrorItem]) -> FailureReport:
    """Value-level ``errors[]`` (no message named): slow the number, or stop the account."""
    report = FailureReport()
    throttled = {
        e.phone_number_id: THROTTLE_CODES[e.code]
        for e in errors
        if e.code in THROTTLE_CODES and e.phone_number_id
    }
    if throttled:
        report.numbers_slowed = phone_numbers_throttle(phone_number_ids=throttled)
    stopping = {e.phone_number_id: e for e in errors if e.code in ACCOUNT_CODES}
    if stopping:
        for number in PhoneNumber.objects.filter(phone_number_id__in=list(stopping)).select_related(
            "account"
        ):
            error = stopping[number.phone_number_id]
            reason = f"account {number.account.waba_id} cannot send: Meta error {error.code}"
            reason += f" ({error.title})" if error.title else ""
            report.campaigns_paused += campaigns_pause_for(account=number.account, reason=reason)
    return report


def _codes(codes: Counter[int]) -> str:
    return ", ".join(str(code) for code, _ in codes.most_common())
