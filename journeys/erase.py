"""Erasing a person from the journeys (webhooks.erasure calls it, in its transaction).

What the journeys keep of a person is theirs alone: their instances (with what they said
to end a wait, the properties of their events), the history of each, their events in, their
place in a segment's memory, their being a test contact. All of it is deleted: a journey's
figures count them no more. Their messages stay, anonymised by the erasure like every
other message of theirs (a step campaign's report still adds up).
"""

from __future__ import annotations

from django.db import connection

from journeys.models import Journey

# Children first: the history names its instance, instances and events name the contact.
_ERASE_SQL = (
    "DELETE FROM journeys_journeyhistory WHERE contact_id = %s",
    "DELETE FROM journeys_journeyinstance WHERE contact_id = %s",
    "DELETE FROM journeys_contactevent WHERE contact_id = %s",
    "DELETE FROM journeys_journeysegmentmember WHERE contact_id = %s",
)


def journeys_person_erase(*, contact_id: int) -> int:
    """Delete the contact's rows of every journey table; how many."""
    deleted = 0
    with connection.cursor() as cursor:
        for sql in _ERASE_SQL:
            cursor.execute(sql, [contact_id])
            deleted += int(cursor.rowcount)
    deleted += Journey.test_contacts.through.objects.filter(contact_id=contact_id).delete()[0]
    return deleted
