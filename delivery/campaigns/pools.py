"""Sender pools: a campaign sent from several numbers of one account at once.

A 10 M campaign at 80 msg/s takes 35 h from one number and 7 h from five. Each recipient
has one home number of the pool and is always sent from it (their replies land in one
conversation): the first pool launch that reaches a contact gives it a home
(``PoolHome``), and every later campaign of the account's pools sends to it from there.

Homes are handed out so that each number's part of *this* campaign's audience is in
proportion to its campaign share: the recipients already at home on a number count
towards it, the newcomers fill what each number lacks. So every number finishes at the
same time (a hash of the phone, the earlier scheme, left a 1,600-recipient number 1–2 %
over or under, and moved most recipients to another number when the pool changed). A
number that leaves the pool keeps nobody: its recipients get a new home at the next pool
launch. A number that leaves for a while (paused, throttled) holds only its own
recipients; the rest of the pool carries on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection

from campaigns.models import Campaign, PhoneNumber
from delivery.campaigns.audience import Audience
from delivery.campaigns.skips import SkipRules


def campaign_pool(campaign: Campaign) -> list[PhoneNumber]:
    """The numbers the campaign sends from: its own first, then the pool's, by id."""
    extra = [n for n in campaign.pool_numbers.order_by("pk") if n.pk != campaign.phone_number_id]
    return [campaign.phone_number, *extra]


def pool_validate(campaign: Campaign, numbers: Sequence[PhoneNumber]) -> None:
    """Every number of the pool must belong to the campaign's account (its templates do)."""
    strangers = [n for n in numbers if n.account_id != campaign.phone_number.account_id]
    if strangers:
        names = ", ".join(str(n) for n in strangers)
        raise ValidationError(
            f"{names} belong to another business account than {campaign.phone_number}: "
            "a pool sends one account's templates, so its numbers share that account"
        )


def _share(number: PhoneNumber) -> float:
    return float(number.rate_per_second) * (1 - float(number.transactional_reserve))


def apportion(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainders; sums to ``total``)."""
    weight_sum = sum(weights)
    if total <= 0 or weight_sum <= 0:
        return [0] * len(weights)
    exact = [total * w / weight_sum for w in weights]
    parts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: exact[i] - parts[i], reverse=True)
    for i in by_remainder[: total - sum(parts)]:
        parts[i] += 1
    return parts


def newcomer_quotas(shares: Sequence[float], at_home: Sequence[int], newcomers: int) -> list[int]:
    """How many of the recipients without a home each number takes.

    Each number's target is its share of the whole sendable audience; what its recipients
    already at home fall short of that target is its deficit, and the newcomers are
    spread in proportion to the deficits (a number already over its target takes none).
    """
    targets = apportion(sum(at_home) + newcomers, shares)
    deficits = [max(0, t - h) for t, h in zip(targets, at_home, strict=True)]
    return apportion(newcomers, deficits)


# The recipients the pool will actually send to: on the campaign's lists and not skipped
# (opted out, a marketing template to a US user, ...: those rows are skipped at the insert
# and need no home). ``{sendable}`` is delivery.campaigns.skips' rule, as the insert uses.
_AUDIENCE_CTE = """
WITH audience AS (
    SELECT c.id FROM campaigns_contact AS c
     WHERE {audience}
       AND {sendable}
)
"""

# Per pool number, how many of the audience are at home on it; NULL: how many have no
# home in the pool (none yet, or one on a number that has left it).
_AT_HOME_SQL = (
    _AUDIENCE_CTE
    + """
SELECT h.phone_number_id, count(*)
  FROM audience AS a
  LEFT JOIN delivery_poolhome AS h
         ON h.contact_id = a.id AND h.account_id = %(account_id)s
        AND h.phone_number_id = ANY(%(pool_ids)s)
 GROUP BY 1
"""
)

# The newcomers, in an order scattered over the contact ids (so no number is handed one
# imported list whole), take the numbers' quotas in turn. A home on a number that has
# left the pool is replaced; one another launch has just given within the pool is kept
# (the WHERE on the conflict: two launches at once never take a contact from each other).
_NEWCOMERS_SQL = (
    _AUDIENCE_CTE  # noqa: S608 - constants; the CASE format() puts in has only placeholders
    + """
INSERT INTO delivery_poolhome (contact_id, account_id, phone_number_id, assigned_at)
SELECT n.id, %(account_id)s, {choice}, now()
  FROM (SELECT a.id, row_number() OVER (ORDER BY hashtext(a.id::text), a.id) AS rank
          FROM audience AS a
         WHERE NOT EXISTS (SELECT 1 FROM delivery_poolhome AS h
                            WHERE h.contact_id = a.id AND h.account_id = %(account_id)s
                              AND h.phone_number_id = ANY(%(pool_ids)s))) AS n
ON CONFLICT (contact_id, account_id) DO UPDATE
   SET phone_number_id = EXCLUDED.phone_number_id, assigned_at = EXCLUDED.assigned_at
 WHERE NOT (delivery_poolhome.phone_number_id = ANY(%(pool_ids)s))
"""
)


def pool_homes_assign(
    numbers: Sequence[PhoneNumber], *, audience: Audience, skips: SkipRules
) -> tuple[str, dict[str, Any]]:
    """Give every recipient of the audience without a home in the pool one, and return the
    SQL expression over contact ``c`` that the message insert uses to pick each row's
    number (with its parameters).

    Runs in the launch's transaction, before the insert. A single number needs no homes.
    """
    if len(numbers) == 1:
        return "%(pool_n0)s", {"pool_n0": numbers[0].pk}
    args: dict[str, Any] = {
        **audience.params,
        **skips.params,
        "account_id": numbers[0].account_id,
        "pool_ids": [n.pk for n in numbers],
    }
    with connection.cursor() as cursor:
        sendable = skips.sendable_sql("c")
        cursor.execute(_AT_HOME_SQL.format(audience=audience.condition, sendable=sendable), args)
        counts = dict(cursor.fetchall())
        quotas = newcomer_quotas(
            [_share(n) for n in numbers],
            [counts.get(n.pk, 0) for n in numbers],
            counts.get(None, 0),
        )
        cases, upper = [], 0
        for index, (number, quota) in enumerate(zip(numbers, quotas, strict=True)):
            upper += quota
            args[f"pool_t{index}"], args[f"pool_n{index}"] = upper, number.pk
            cases.append(f"WHEN n.rank <= %(pool_t{index})s THEN %(pool_n{index})s")
        # Only placeholders and constants go into the text.
        choice = f"CASE {' '.join(cases)} END"
        cursor.execute(
            _NEWCOMERS_SQL.format(choice=choice, audience=audience.condition, sendable=sendable),
            args,
        )
    # Skipped recipients (opted out, US) have no home: their rows carry the campaign's own
    # number, which never sends them.
    expr = (
        "COALESCE((SELECT h.phone_number_id FROM delivery_poolhome AS h"
        " WHERE h.contact_id = c.id AND h.account_id = %(pool_account)s"
        " AND h.phone_number_id = ANY(%(pool_all)s)), %(pool_n0)s)"
    )
    return expr, {
        "pool_account": numbers[0].account_id,
        "pool_all": [n.pk for n in numbers],
        "pool_n0": numbers[0].pk,
    }
