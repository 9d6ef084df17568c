"""A contact's consent as the campaigns see it: opting out skips what still waits to go.

One home for every way a user says stop (a STOP reply, Meta's ``user_preferences`` stop,
a 131050 from a send or a status callback) and for a resume, so the next campaign and the
rows of the running one agree.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from campaigns.audience.opt_outs import contacts_opt_in, contacts_opt_out
from delivery.messages import campaign_pending_skip_for_contacts

logger = logging.getLogger(__name__)


def contacts_stop(*, contact_ids: Sequence[int], at: datetime, reason: str) -> int:
    """Opt the contacts out at ``at`` and skip their campaign rows still pending.

    Returns how many contacts were newly opted out. Transactional messages still go.
    """
    ids = sorted(set(contact_ids))
    if not ids:
        return 0
    opted = contacts_opt_out(contact_ids=ids, at=at, reason=reason)
    skipped = campaign_pending_skip_for_contacts(contact_ids=ids, reason=reason)
    if opted or skipped:
        logger.info(
            "%s contacts opted out (%s); %s pending messages skipped", opted, reason, skipped
        )
    return opted


def contacts_resume(*, contact_ids: Sequence[int], at: datetime) -> int:
    """The contacts asked for marketing messages again; returns how many changed."""
    return contacts_opt_in(contact_ids=sorted(set(contact_ids)), at=at)
