"""A recipient's time zone: a contact attribute, else the phone number's, else the default.

The rules, the same in Python (``recipient_zone``) and in SQL (``zone_sql``, for the
launch's set-based INSERT and for counting recipients per zone):

1. the contact attribute the campaign names (``Campaign.time_zone_attribute``) when it
   holds a valid IANA name (any case: ``america/sao_paulo`` is ``America/Sao_Paulo``);
2. else the zones ``phonenumbers`` gives the number's longest known prefix (its
   ``tzdata``, the data ``phonenumbers.timezone.time_zones_for_number`` reads): one zone
   is the answer; several (a whole country such as Australia) resolve to the campaign's
   default zone when it is one of them, else to the first, deterministically;
3. else (no data) the campaign's default zone, else UTC.

The prefix lookup skips the library's number-type check: for a mobile number in a country
whose mobiles it does not geolocate it answers at country level, which for the islands of
the +1 plan is the first zone of the whole plan (America/Adak) rather than the island's
own, which the prefix gives. A prefix lookup is also what the database can do for a
million rows at once.
"""

from __future__ import annotations

import functools
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from phonenumbers.tzdata import TIMEZONE_DATA, TIMEZONE_LONGEST_PREFIX

if TYPE_CHECKING:
    from django.db.backends.utils import CursorWrapper

UNKNOWN_ZONE = "Etc/Unknown"
DEFAULT_ZONE = "UTC"


@functools.cache
def iana_zones() -> dict[str, str]:
    """Lower-cased IANA name → its proper spelling, for every zone this system knows."""
    return {name.lower(): name for name in zoneinfo.available_timezones()}


def zone_valid(name: Any) -> str | None:
    """The IANA zone ``name`` spells (any case), or None."""
    if not isinstance(name, str) or not name.strip():
        return None
    return iana_zones().get(name.strip().lower())


def phone_zones(phone: str) -> tuple[str, ...]:
    """The zones of an E.164 number's longest known prefix; () when there is no data."""
    digits = phone.lstrip("+")
    for length in range(min(TIMEZONE_LONGEST_PREFIX, len(digits)), 0, -1):
        zones = TIMEZONE_DATA.get(digits[:length])
        if zones is not None:
            return tuple(z for z in zones if z != UNKNOWN_ZONE)
    return ()


def zone_pick(zones: Sequence[str], default_zone: str) -> str | None:
    """One zone out of several: the default when it is among them, else the first."""
    if not zones:
        return None
    return default_zone if default_zone in zones else zones[0]


def recipient_zone(*, phone: str, attribute_value: Any, default_zone: str = "") -> str:
    """The zone a recipient's window is read in (see the module's rules)."""
    default = zone_valid(default_zone) or DEFAULT_ZONE
    return (
        zone_valid(attribute_value)
        or zone_pick([z for z in phone_zones(phone) if zone_valid(z)], default)
        or default
    )


@functools.cache
def _prefix_table(default_zone: str) -> tuple[list[str], list[str]]:
    """(prefixes, zones): every tzdata prefix resolved to one zone for this default."""
    prefixes, zones = [], []
    for prefix, candidates in TIMEZONE_DATA.items():
        known = [z for z in candidates if z != UNKNOWN_ZONE and zone_valid(z)]
        prefixes.append(prefix)
        zones.append(zone_pick(known, default_zone) or default_zone)
    return prefixes, zones


def prefix_zones(default_zone: str) -> set[str]:
    """Every zone a phone number can resolve to under ``default_zone``."""
    return set(_prefix_table(default_zone)[1]) | {default_zone}


@dataclass(frozen=True)
class ZoneSql:
    """SQL that computes each row's zone: joins, the zone expression and its parameters.

    It reads lookup tables ``zone_tables_load`` creates for the current transaction.
    """

    joins: str
    expr: str
    params: dict[str, Any]


def zone_sql(*, phone: str, attributes: str, attribute: str, default_zone: str) -> ZoneSql:
    """The zone of each row, from the SQL expressions of its phone and attributes jsonb.

    The longest-prefix match is one equality join per prefix length (1 to 9 digits)
    against the ~3,000-row prefix table: the database hashes the small table and probes it
    per row, so a million rows cost a few hash probes each. ``coalesce`` takes the longest
    prefix that matched.
    """
    default = zone_valid(default_zone) or DEFAULT_ZONE
    lengths = sorted({len(p) for p in _prefix_table(default)[0]}, reverse=True)
    joins = [
        f"LEFT JOIN wb_tz_prefix AS tz{n} ON tz{n}.key = substr({phone}, 2, {n})" for n in lengths
    ]
    candidates = [f"tz{n}.value" for n in lengths]
    params: dict[str, Any] = {"tz_default": default}
    if attribute:
        joins.append(
            "LEFT JOIN wb_tz_name AS tzn "
            f"ON tzn.key = lower(btrim({attributes} ->> %(tz_attribute)s))"
        )
        candidates.insert(0, "tzn.value")
        params["tz_attribute"] = attribute
    expr = f"coalesce({', '.join(candidates)}, %(tz_default)s)"
    return ZoneSql(joins="\n  ".join(joins), expr=expr, params=params)


def zone_tables_load(cursor: CursorWrapper, *, default_zone: str, attribute: str) -> None:
    """Create the lookup tables ``zone_sql`` joins, for the current transaction.

    Real tables with a primary key rather than arrays in a CTE: knowing each prefix is
    unique, the planner expects one match per row; over an anonymous CTE it multiplies
    its row estimate at each of the nine joins and plans enormous batched hash joins.
    """
    default = zone_valid(default_zone) or DEFAULT_ZONE
    prefixes, zones = _prefix_table(default)
    lookup_table_load(cursor, "wb_tz_prefix", prefixes, zones)
    if attribute:
        names = iana_zones()
        lookup_table_load(cursor, "wb_tz_name", list(names), list(names.values()))


def lookup_table_load(
    cursor: CursorWrapper,
    name: str,
    keys: Sequence[str],
    values: Sequence[Any],
    *,
    value_type: str = "text",
) -> None:
    """A temporary ``name(key text primary key, value)`` dropped at commit.

    Must run inside a transaction (the table is gone when it ends). ``name`` and
    ``value_type`` are fixed identifiers of this module's callers, never user input.
    """
    cursor.execute(f"DROP TABLE IF EXISTS {name}")
    cursor.execute(
        f"CREATE TEMP TABLE {name} (key text PRIMARY KEY, value {value_type} NOT NULL) "
        "ON COMMIT DROP"
    )
    cursor.execute(
        f"INSERT INTO {name} SELECT * FROM unnest(%s::text[], %s::{value_type}[])",  # noqa: S608
        [list(keys), list(values)],
    )
    cursor.execute(f"ANALYZE {name}")
