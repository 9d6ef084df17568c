"""A campaign's replies page: what recipients wrote back, newest first, a page at a time.

Marketing reads the replies of its campaigns here; the Inbound pages (every message any
user sent, whatever the campaign) stay Support's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

from django.core.paginator import Paginator

from campaigns.models import Campaign
from webhooks.selectors import (
    Reply,
    campaign_replier_counts,
    campaign_replies,
    campaign_reply_counts,
)

REPLIES_PER_PAGE = 50


def replies_summary(*, recipients: int, replies: int, opt_outs: int) -> str:
    """ "1 recipient replied", "2 recipients replied (3 replies) · 1 opted out"."""
    text = f"{recipients:,} recipient{'' if recipients == 1 else 's'} replied"
    if replies != recipients:
        text += f" ({replies:,} repl{'y' if replies == 1 else 'ies'})"
    if opt_outs:
        text += f" · {opt_outs:,} opted out"
    return text


class _CampaignReplies(Sequence[Reply]):
    """The campaign's replies as Django's Paginator reads a list: its length is the count
    the campaign's reply counters already hold, and a slice is one page's query."""

    def __init__(self, campaign_id: int, total: int) -> None:
        self.campaign_id = campaign_id
        self.total = total

    def __len__(self) -> int:
        return self.total

    @overload
    def __getitem__(self, index: int) -> Reply: ...

    @overload
    def __getitem__(self, index: slice) -> list[Reply]: ...

    def __getitem__(self, index: int | slice) -> Reply | list[Reply]:
        if isinstance(index, int):
            found = campaign_replies(campaign_id=self.campaign_id, offset=index, limit=1)
            if not found:
                raise IndexError(index)
            return found[0]
        start = index.start or 0
        return campaign_replies(
            campaign_id=self.campaign_id, offset=start, limit=(index.stop or start) - start
        )


def campaign_replies_context(*, campaign: Campaign, page: str | None) -> dict[str, Any]:
    """The page's rows and its place among the pages, for the replies template."""
    counts = campaign_reply_counts(campaign_ids=[campaign.pk]).get(campaign.pk, {})
    people = campaign_replier_counts(campaign_ids=[campaign.pk]).get(campaign.pk, {})
    total = counts.get("replies", 0)
    paginator: Paginator[Reply] = Paginator(_CampaignReplies(campaign.pk, total), REPLIES_PER_PAGE)
    shown = paginator.get_page(page)  # a missing, wrong or too large number: the nearest page
    return {
        "replies": list(shown.object_list),
        "summary": replies_summary(
            recipients=people.get("replied", 0),
            replies=total,
            opt_outs=people.get("opted_out", 0),
        ),
        "total": total,
        "page_number": shown.number,
        "pages": paginator.num_pages,
        "first_shown": shown.start_index(),
        "last_shown": shown.end_index(),
        "previous_page": shown.previous_page_number() if shown.has_previous() else None,
        "next_page": shown.next_page_number() if shown.has_next() else None,
    }
