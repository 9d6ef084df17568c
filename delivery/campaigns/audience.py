"""Who a campaign is addressed to: the one SQL condition every statement that asks uses.

The launch's insert and its mapped-field check, the send-window schedule, the canary's
boundary, sender pools' homes, the cost estimate and the pre-flight all ask "who is on this
campaign"; each takes ``IN_AUDIENCE`` (over the contact alias ``c``) or ``in_audience`` (over
another contact id column) with ``audience_params``, so a new way to choose recipients is
added here once. Who of them is then skipped, and why, is ``delivery.campaigns.skips``.

Today the audience is the distinct contacts of the campaign's lists. ``IN (SELECT …)``
over the membership table's (list, contact) index reads each list once and hashes it: a
contact on two lists is one recipient, whatever the number of lists. (The pre-flight's
count of list entries, duplicates included, reads the lists themselves.)
"""

from __future__ import annotations

from typing import Any

from campaigns.models import Campaign


def in_audience(contact_id: str) -> str:
    """True for a contact id (``contact_id``: a column) in the audience ``audience_params``
    binds."""
    return (
        f"{contact_id} IN (SELECT contact_id FROM campaigns_listmembership"  # noqa: S608 - a column name from the caller's constant
        " WHERE contact_list_id = ANY(%(list_ids)s))"
    )


IN_AUDIENCE = in_audience("c.id")


def audience_params(campaign: Campaign) -> dict[str, Any]:
    """The parameters ``IN_AUDIENCE`` and ``in_audience`` take, bound beside a statement's own."""
    return {"list_ids": list(campaign.lists.values_list("pk", flat=True))}
