"""The template catalogue: each business account's templates as Meta lists them.

``templates_sync`` pages through ``GET /{version}/{waba_id}/message_templates`` with the
access token of one of the account's numbers, then writes the whole listing in one
transaction: every template upserted on (account, name, language) with its components
parsed (``campaigns.catalogue.components``; one this version cannot send, such as a
carousel or a limited-time offer, is stored all the same and named in the report and the
log with why: ``campaigns.catalogue.sendable``), and templates Meta listed before but no
longer lists marked DELETED with ``removed_upstream_at`` (never deleted: campaigns and
messages refer to them). A failure anywhere in the listing writes nothing, so a page that
did not arrive can never mark templates as removed. Campaigns whose template stops being
APPROVED are paused with the reason, as the template status webhook does.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from campaigns.catalogue.components import components_parse
from campaigns.models import BusinessAccount, PhoneNumber, Template, TemplateStatus
from campaigns.state import campaigns_pause_for
from delivery.cloud.client import ApiError, CloudApiClient, TemplatePage, get_client
from whatsblast.core import queues
from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

PAGE_SIZE = 100
# A WABA holds at most 6,000 templates: 60 pages. A cursor that never ends is a bug
# upstream; stop rather than loop.
MAX_PAGES = 100
# Columns a sync owns; anything else on the row (its id, created_at) is kept.
_SYNCED_FIELDS = (
    "meta_template_id",
    "category",
    "previous_category",
    "status",
    "status_reason",
    "parameter_format",
    "rejected_reason",
    "quality_score",
    "body_text",
    "body_param_count",
    "body_param_names",
    "body_examples",
    "header_format",
    "header_text",
    "header_param",
    "header_example",
    "buttons",
    "cards",
    "offer",
    "message_send_ttl_seconds",
    "components",
    "synced_at",
    "removed_upstream_at",
    "updated_at",
)


class TemplateSyncError(Exception):
    """The listing could not be read; the message says why in the operator's terms."""


@dataclass
class TemplateSyncReport:
    waba_id: str
    listed: int = 0
    created: int = 0
    changed: int = 0
    removed: int = 0
    pages: int = 0
    campaigns_paused: int = 0
    # name (language) → why a campaign cannot use it.
    unusable: dict[str, list[str]] = field(default_factory=dict)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def templates_sync(
    *,
    account: BusinessAccount,
    client: CloudApiClient | None = None,
    now: datetime | None = None,
) -> TemplateSyncReport:
    """Bring ``account``'s templates in line with Meta's listing; errors go in the report."""
    report = TemplateSyncReport(waba_id=account.waba_id)
    try:
        listing = _listing_fetch(account, client or get_client(), report)
    except TemplateSyncError as exc:
        report.error = str(exc)
        logger.warning("template sync of WABA %s failed: %s", account.waba_id, exc)
        return report
    _listing_write(account, listing, report, now=now or timezone.now())
    logger.info(
        "template sync of WABA %s: %s listed, %s new, %s changed, %s removed upstream",
        account.waba_id,
        report.listed,
        report.created,
        report.changed,
        report.removed,
    )
    for name, reasons in sorted(report.unusable.items()):
        logger.warning(
            "template %s of WABA %s is not usable by campaigns: %s",
            name,
            account.waba_id,
            "; ".join(reasons),
        )
    return report


def templates_sync_all(*, client: CloudApiClient | None = None) -> list[TemplateSyncReport]:
    """Sync every account that has a phone number (and so a token to list with)."""
    accounts = BusinessAccount.objects.filter(phone_numbers__isnull=False).distinct()
    return [templates_sync(account=account, client=client) for account in accounts]


# --- reading the listing -----------------------------------------------------------------------


def _listing_fetch(
    account: BusinessAccount, client: CloudApiClient, report: TemplateSyncReport
) -> list[dict[str, Any]]:
    number = PhoneNumber.objects.filter(account=account).order_by("pk").first()
    if number is None:
        raise TemplateSyncError(
            f"WABA {account.waba_id} has no phone number, so no access token to list with"
        )
    base_url = str(number.api_base_url or settings.WHATSAPP_API_BASE_URL)
    templates: list[dict[str, Any]] = []
    after: str | None = None
    for _ in range(MAX_PAGES):
        page = client.list_templates(
            base_url=base_url,
            waba_id=account.waba_id,
            access_token=number.access_token,
            after=after,
            limit=PAGE_SIZE,
        )
        if isinstance(page, ApiError):
            raise TemplateSyncError(sync_error_text(page, base_url=base_url))
        report.pages += 1
        templates.extend(_valid(page))
        if page.after is None:
            return templates
        after = page.after
    raise TemplateSyncError(f"the listing did not end after {MAX_PAGES} pages")


def _valid(page: TemplatePage) -> list[dict[str, Any]]:
    return [t for t in page.templates if t.get("name") and t.get("language")]


def sync_error_text(error: ApiError, *, base_url: str) -> str:
    """An operator's sentence for a failed listing call (never includes the token)."""
    detail = "; ".join(part for part in (error.title, error.details) if part)
    if error.http_status is None:
        return f"could not reach {base_url}: {detail}"
    if error.code == 190 or error.http_status == 401:
        return f"Meta refused the access token (code {error.code or 190}): {detail}"
    if error.code in (4, 80007):
        wait = f", retry in {error.retry_after_s:.0f}s" if error.retry_after_s else ""
        return (
            f"Meta's rate limit for management calls (code {error.code}){wait}: {detail}; "
            "it allows 200 to 5,000 calls an hour per WABA"
        )
    if error.code == 100:
        return f"Meta did not accept the request (code 100, WABA id or permissions?): {detail}"
    code = f"code {error.code}" if error.code is not None else f"HTTP {error.http_status}"
    return f"the template listing failed ({code}): {detail}"


# --- writing it --------------------------------------------------------------------------------


def _listing_write(
    account: BusinessAccount,
    listing: list[dict[str, Any]],
    report: TemplateSyncReport,
    *,
    now: datetime,
) -> None:
    with transaction.atomic():
        existing = {
            (t.name, t.language): t
            for t in Template.objects.select_for_update().filter(account=account)
        }
        rows: dict[tuple[str, str], Template] = {}
        for item in listing:
            template, problems = _template_from_graph(account, item, now)
            key = (template.name, template.language)
            if key in existing and existing[key].status == template.status:
                # The listing carries no reason; keep the one a status webhook gave.
                template.status_reason = existing[key].status_reason
            rows[key] = template
            if problems:
                report.unusable[str(template)] = problems
        report.listed = len(rows)
        stopped = _stopped_templates(existing, rows)
        if rows:
            Template.objects.bulk_create(
                rows.values(),
                update_conflicts=True,
                unique_fields=("account", "name", "language"),
                update_fields=_SYNCED_FIELDS,
            )
        report.created = len(rows.keys() - existing.keys())
        report.changed = sum(
            1 for key, new in rows.items() if key in existing and _differs(existing[key], new)
        )
        gone = [
            t.pk
            for key, t in existing.items()
            if key not in rows and t.synced_at is not None and t.removed_upstream_at is None
        ]
        if gone:
            report.removed = Template.objects.filter(pk__in=gone).update(
                status=TemplateStatus.DELETED,
                status_reason=f"no longer listed by Meta (sync of {now:%Y-%m-%d %H:%M} UTC)",
                removed_upstream_at=now,
                updated_at=now,
            )
            stopped.extend(t for t in existing.values() if t.pk in gone)
        for template in stopped:
            report.campaigns_paused += campaigns_pause_for(
                template=template,
                reason=f"template {template} is no longer approved (template sync)",
            )


def _template_from_graph(
    account: BusinessAccount, item: dict[str, Any], now: datetime
) -> tuple[Template, list[str]]:
    """The row for one listed template, and why a campaign could not use it (if so)."""
    parsed = components_parse(item.get("components"))
    template = Template(
        account=account,
        name=str(item["name"])[:512],
        language=str(item["language"])[:16],
        meta_template_id=str(item.get("id") or "")[:64],
        category=str(item.get("category") or "MARKETING").upper()[:32],
        status=str(item.get("status") or TemplateStatus.PENDING).upper()[:32],
        status_reason="",
        previous_category=str(item.get("previous_category") or "").upper()[:32],
        parameter_format=str(item.get("parameter_format") or "").upper()[:16],
        rejected_reason=_reason(item.get("rejected_reason"))[:200],
        quality_score=_quality(item.get("quality_score"))[:16],
        body_text=parsed.body_text,
        body_param_count=parsed.body_param_count,
        body_param_names=parsed.body_param_names,
        body_examples=parsed.body_examples,
        header_format=parsed.header_format,
        header_text=parsed.header_text,
        header_param=parsed.header_param[:64],
        header_example=parsed.header_example,
        buttons=parsed.buttons,
        cards=parsed.cards,
        offer=parsed.offer,
        message_send_ttl_seconds=_ttl(item.get("message_send_ttl_seconds")),
        components=item.get("components") or [],
        synced_at=now,
        removed_upstream_at=None,
        updated_at=now,
    )
    return template, parsed.problems


def _ttl(value: Any) -> int | None:
    """``message_send_ttl_seconds``: whole seconds, or None when Meta gives none."""
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds > 0 else None


def _reason(value: Any) -> str:
    """``rejected_reason``: "NONE" when there is none."""
    text = str(value or "").strip()
    return "" if text.upper() == "NONE" else text


def _quality(value: Any) -> str:
    """``quality_score``: ``{"score": "GREEN", "date": …}`` (or a bare string)."""
    if isinstance(value, dict):
        value = value.get("score")
    return str(value or "").upper()


def _stopped_templates(
    existing: dict[tuple[str, str], Template], rows: dict[tuple[str, str], Template]
) -> list[Template]:
    """Templates that were APPROVED here and are listed in another state now."""
    return [
        existing[key]
        for key, new in rows.items()
        if key in existing
        and existing[key].status == TemplateStatus.APPROVED
        and new.status != TemplateStatus.APPROVED
    ]


def _differs(old: Template, new: Template) -> bool:
    ignored = {"synced_at", "updated_at"}
    return any(
        getattr(old, name) != getattr(new, name) for name in _SYNCED_FIELDS if name not in ignored
    )


# Meta allows 200 (5,000 for an active WABA) management calls an hour per WABA; a sync
# costs one call per 100 templates, so every 15 minutes is a handful of calls an hour.
_SYNC_DUE_KEY = "wb:template-sync:due"


def template_sync_schedule() -> bool:
    """Enqueue the catalogue sync unless one was enqueued within the interval.

    Every maintenance tick (every second or two, from any number of tickers) asks; the
    Redis key, set only if absent and expiring after the interval, lets one through.
    ``TEMPLATE_SYNC_INTERVAL_SECONDS = 0`` in the settings turns the periodic sync off.
    """
    interval = int(settings.TEMPLATE_SYNC_INTERVAL_SECONDS)
    if interval <= 0 or not get_redis().set(_SYNC_DUE_KEY, 1, nx=True, ex=interval):
        return False
    queues.enqueue(queues.TEMPLATE_SYNC)
    return True


# Meta's ranges for message_send_ttl_seconds by category (Meta, "Time-to-live", updated
# 2026-05-21): a marketing template's is honoured only through the Marketing Messages API.
TTL_RANGES: dict[str, tuple[int, int]] = {
    "MARKETING": (43_200, 2_592_000),
    "UTILITY": (30, 43_200),
    "AUTHENTICATION": (30, 900),
}


class TemplateTtlError(ValueError):
    """The time to live could not be set (out of range, or Meta refused it)."""


def ttl_range_check(category: str, seconds: int) -> None:
    low, high = TTL_RANGES.get(category.upper(), (30, 2_592_000))
    if not low <= seconds <= high:
        raise TemplateTtlError(
            f"a {category.lower()} template's time to live is {low:,} to {high:,} seconds"
        )


def template_ttl_set(*, template: Template, seconds: int) -> None:
    """Set the template's time to live at Meta (``POST /{template_id}``), then here."""
    ttl_range_check(template.category, seconds)
    if not template.meta_template_id:
        raise TemplateTtlError("the template has no Meta id yet: sync the templates first")
    number = PhoneNumber.objects.filter(account_id=template.account_id).order_by("pk").first()
    if number is None:
        raise TemplateTtlError("the template's WABA has no phone number, so no access token")
    result = get_client().post_node(
        base_url=str(number.api_base_url or settings.WHATSAPP_API_BASE_URL),
        node_id=template.meta_template_id,
        access_token=number.access_token,
        data={"message_send_ttl_seconds": seconds},
    )
    if isinstance(result, ApiError):
        raise TemplateTtlError(f"Meta refused it: {result.title or result.details}")
    Template.objects.filter(pk=template.pk).update(
        message_send_ttl_seconds=seconds, updated_at=timezone.now()
    )
    template.message_send_ttl_seconds = seconds
