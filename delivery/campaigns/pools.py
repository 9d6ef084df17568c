"""Sender pools: a campaign sent from several numbers of one account at once.

A 10 M campaign at 80 msg/s takes 35 h from one number and 7 h from five. Each recipient
is given one number of the pool at launch and always sent from it (their replies land in
one conversation): a hash of their phone picks the number, with each number's chance in
proportion to its campaign share, so every number finishes at about the same time. A
number that leaves for a while (paused, throttled) holds only its own recipients; the rest
of the pool carries on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError

from campaigns.models import Campaign, PhoneNumber

# The hash of a phone spread over this many buckets, shared out between the numbers.
_BUCKETS = 1_000_000


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


def pool_number_sql(numbers: Sequence[PhoneNumber], alias: str = "c") -> tuple[str, dict[str, Any]]:
    """A SQL expression over contact ``alias`` giving each recipient's number of the pool.

    ``hashtext`` of the phone, taken into [0, _BUCKETS), falls in one number's range; the
    ranges are proportional to the numbers' campaign shares. The ids and thresholds travel
    as query parameters.
    """
    if len(numbers) == 1:
        return "%(pool_n0)s", {"pool_n0": numbers[0].pk}
    total = sum(_share(n) for n in numbers)
    params: dict[str, Any] = {}
    cases = []
    upper = 0.0
    for index, number in enumerate(numbers[:-1]):
        upper += _share(number) / total * _BUCKETS
        cases.append(f"WHEN %(pool_t{index})s > h THEN %(pool_n{index})s")
        params[f"pool_t{index}"] = int(round(upper))
        params[f"pool_n{index}"] = number.pk
    last = len(numbers) - 1
    params[f"pool_n{last}"] = numbers[last].pk
    hashed = f"mod(hashtext({alias}.phone)::bigint + 2147483648, {_BUCKETS})"
    # Only placeholders, a fixed alias and constants go into the text.
    choice = f"CASE {' '.join(cases)} ELSE %(pool_n{last})s END"
    expr = f"(SELECT {choice} FROM (SELECT {hashed} AS h) AS p)"  # noqa: S608
    return expr, params
