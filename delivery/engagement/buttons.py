"""Button answers: which quick replies a campaign's recipients tapped, and who tapped; and
the link clicks Meta reports on Marketing Messages API sends, per template.

A tap on a template's quick-reply button comes back as an inbound message of type
``button`` (``button.text``, ``button.payload``; an interactive message's button as
``interactive`` ``button_reply``), naming the message tapped in ``context.id``. The webhooks
app stores it with that wamid (``context_wamid``) and counts it for the campaign of the
message it answers, else for the campaign that last messaged the contact
(``webhooks.inbound``).

The inbound table is named here as text, as ``delivery.segments.sql`` names it: delivery
sits below the webhooks app and cannot import its models.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

_INBOUND_TABLE = "webhooks_inboundmessage"
# The inbound kinds that are a tap on a button (a template's quick reply, or an interactive
# message's reply button or list row).
TAP_TYPES = ("button", "interactive")

# One person, however the inbound row names them: the contact when known, else the phone,
# else the user id (a tap from someone we cannot match still counts once per sender).
_PERSON = "COALESCE(i.contact_id::text, NULLIF(i.from_phone, ''), i.from_user_id)"


@dataclass(frozen=True)
class ButtonTaps:
    text: str  # the button's label as the user saw it
    payload: str  # what the button carried ("" when the template set none)
    taps: int  # every tap, a person tapping twice counted twice
    people: int  # distinct people who tapped it


def campaign_button_taps(campaign_id: int) -> list[ButtonTaps]:
    """The quick replies tapped on ``campaign_id``'s messages, most tapped first.

    One row per (text, payload): the same label with two payloads (a payload per contact)
    stays two rows, as Meta reports them. Read through ``inbound_campaign_idx`` (campaign,
    sent_at): only the campaign's replies are visited.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT i.text, i.button_payload, count(*) AS taps,
                   count(DISTINCT {_PERSON}) AS people
            FROM {_INBOUND_TABLE} AS i
            WHERE i.campaign_id = %(campaign)s AND i.type = ANY(%(types)s)
            GROUP BY i.text, i.button_payload
            ORDER BY taps DESC, people DESC, i.text, i.button_payload
            """,  # noqa: S608 - only this module's constants are spliced; values are bound
            {"campaign": campaign_id, "types": list(TAP_TYPES)},
        )
        return [ButtonTaps(text, payload, taps, people) for text, payload, taps, people in cursor]


def campaign_button_taps_by_variant(campaign_id: int) -> dict[int | None, int]:
    """People who tapped any button, per A/B arm (``Message.variant``; ``None``: no test, or
    the remainder sent the winner).

    A tap is placed by the message it answers (``context_wamid``, joined to the message's
    unique wamid); a tap stored without one (before the column, or a payload without
    ``context``) by the contact's message in the campaign (a recipient gets a campaign at
    most once). A tap that reaches neither is not counted here. A person who tapped under
    two arms (impossible for one campaign's single message each) would count in both.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH taps AS (
                SELECT i.context_wamid, i.contact_id, {_PERSON} AS person
                FROM {_INBOUND_TABLE} AS i
                WHERE i.campaign_id = %(campaign)s AND i.type = ANY(%(types)s)
            ),
            -- Two index lookups rather than one join on an OR: the wamid's unique index
            -- for a tap that names its message, the contact's for one that does not.
            placed AS (
                SELECT m.variant, t.person FROM taps AS t
                JOIN delivery_message AS m ON m.wamid = t.context_wamid
                WHERE t.context_wamid <> '' AND m.campaign_id = %(campaign)s
                UNION ALL
                SELECT m.variant, t.person FROM taps AS t
                JOIN delivery_message AS m ON m.contact_id = t.contact_id
                WHERE t.context_wamid = '' AND m.campaign_id = %(campaign)s
            )
            SELECT variant, count(DISTINCT person) FROM placed
            GROUP BY variant
            """,  # noqa: S608 - only this module's constants are spliced; values are bound
            {"campaign": campaign_id, "types": list(TAP_TYPES)},
        )
        return {variant: people for variant, people in cursor}


# --- clicks Meta reports on Marketing Messages API sends -----------------------------------

_MARKETING_CLICK_TABLE = "webhooks_marketingclick"
# Where a send went through the Marketing Messages API (Message.send_route).
MM_ROUTES = ("marketing_messages", "rerouted_to_marketing_messages")
# Meta reports clicks only for messages sent in the last 7 days ("Track click events").
MM_CLICK_WINDOW_DAYS = 7


def template_marketing_clicks(template_ids: list[int], since: datetime) -> dict[int | None, int]:
    """Link clicks Meta reported (``user_actions``) since ``since``, per template (our
    ``Template`` ids), inferred by number and time.

    Meta's click carries no wamid, recipient or template: only the number it came to, a
    time, an opaque tracking token and a click id (docs/engagement.md, "What Meta reports
    about clicks"). A click is
    counted for a template when that template is the only one the number sent through the
    Marketing Messages API in the 7 days (UTC days, whole) before the click; a click that
    one of ``template_ids`` may have earned but that another template may have too is
    counted under ``None``. An estimate, not an attribution.

    Why this shape: the number's Marketing Messages sends are grouped per (template, day)
    in one pass (a few rows per template and day), and each click is compared with those
    rows, never with the messages themselves.
    """
    if not template_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH clicks AS (
                SELECT k.id, COALESCE(k.clicked_at, k.received_at) AS at, pn.id AS number_id
                FROM {_MARKETING_CLICK_TABLE} AS k
                JOIN campaigns_phonenumber AS pn ON pn.phone_number_id = k.phone_number_id
                WHERE COALESCE(k.clicked_at, k.received_at) >= %(since)s
                  AND k.action_type = 'marketing_messages_link_click'
            ),
            sent_days AS (
                SELECT m.phone_number_id AS number_id, m.template_id,
                       date_trunc('day', m.sent_at AT TIME ZONE 'UTC') AS day
                FROM delivery_message AS m
                WHERE m.phone_number_id IN (SELECT number_id FROM clicks)
                  AND m.send_route = ANY(%(routes)s)
                  AND m.sent_at >= %(since)s - make_interval(days => %(window)s + 1)
                GROUP BY 1, 2, 3
            ),
            candidates AS (
                SELECT c.id, array_agg(DISTINCT s.template_id) AS templates
                FROM clicks AS c
                JOIN sent_days AS s ON s.number_id = c.number_id
                 AND s.day BETWEEN date_trunc('day', c.at AT TIME ZONE 'UTC')
                                   - make_interval(days => %(window)s)
                               AND date_trunc('day', c.at AT TIME ZONE 'UTC')
                GROUP BY c.id
            )
            SELECT CASE WHEN cardinality(templates) = 1 THEN templates[1] END, count(*)
            FROM candidates
            WHERE templates && %(templates)s::bigint[]
            GROUP BY 1
            """,  # noqa: S608 - only this module's constants are spliced; values are bound
            {
                "since": since,
                "routes": list(MM_ROUTES),
                "window": MM_CLICK_WINDOW_DAYS,
                "templates": list(template_ids),
            },
        )
        return {template: clicks for template, clicks in cursor}
