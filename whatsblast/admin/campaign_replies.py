"""A campaign's replies page: what recipients wrote back, newest first, a page at a time.

Marketing reads the replies of its campaigns here; the Inbound pages (every message any
user sent, whatever the campaign) stay Support's.
"""

from __future__ import annotations

from typing import Any

from campaigns.models import Campaign
from webhooks.selectors import campaign_replier_counts, campaign_replies, campaign_reply_counts

REPLIES_PER_PAGE = 50


def replies_summary(*, recipients: int, replies: int, opt_outs: int) -> str:
    """ "1 recipient replied", "2 recipients replied (3 replies) · 1 opted out"."""
    text = f"{recipients:,} recipient{'' if recipients == 1 else 's'} replied"
    if replies != recipients:
        text += f" ({replies:,} repl{'y' if replies == 1 else 'ies'})"
    if opt_outs:
        text += f" · {opt_outs:,} opted out"
    return text


def _page_number(raw: str | None, pages: int) -> int:
    try:
        number = int(raw or 1)
    except ValueError:
        number = 1
    return min(max(1, number), max(1, pages))


def campaign_replies_context(*, campaign: Campaign, page: str | None) -> dict[str, Any]:
    """The page's rows and its place among the pages, for the replies template."""
    counts = campaign_reply_counts(campaign_ids=[campaign.pk]).get(campaign.pk, {})
    people = campaign_replier_counts(campaign_ids=[campaign.pk]).get(campaign.pk, {})
    total = counts.get("replies", 0)
    pages = max(1, -(-total // REPLIES_PER_PAGE))
    number = _page_number(page, pages)
    offset = (number - 1) * REPLIES_PER_PAGE
    return {
        "replies": campaign_replies(campaign_id=campaign.pk, offset=offset, limit=REPLIES_PER_PAGE),
        "summary": replies_summary(
            recipients=people.get("replied", 0),
            replies=total,
            opt_outs=people.get("opted_out", 0),
        ),
        "total": total,
        "page_number": number,
        "pages": pages,
        "first_shown": offset + 1 if total else 0,
        "last_shown": min(offset + REPLIES_PER_PAGE, total),
        "previous_page": number - 1 if number > 1 else None,
        "next_page": number + 1 if number < pages else None,
    }
