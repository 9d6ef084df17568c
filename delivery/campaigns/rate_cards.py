"""Meta's published per-message rate card, loaded from Meta's own file into ``RateCard``.

Meta publishes its rates as one file per currency (CSV or XLSX, linked from "Pricing on the
WhatsApp Business Platform", https://developers.facebook.com/docs/whatsapp/pricing, and
its "Authentication-international rates" page): a few lines of title and effective date,
then a header row and one row per market::

    Market, Currency, Marketing, Utility, Authentication, Authentication-International, Service
    Argentina, USD, 0.0618, 0.0340, 0.0367, , 0.00
    ...
    North America, USD, 0.0250, 0.0040, 0.0135, , 0.00
    Rest of Latin America, USD, 0.0740, 0.0113, 0.0157, , 0.00
    Other, USD, 0.0604, 0.0077, 0.0191, , 0.00

A market is a country (Brazil), a group of countries Meta prices together ("North
America", "Rest of Western Europe"...) or "Other" (every country no row names). Rates are
billed by the recipient's country calling code, so each market becomes the calling-code
prefixes of its countries (``market_prefixes``): "+55" for Brazil, "+1876" for Jamaica
(which shares +1 with the US and Canada and is priced with the Caribbean), "*" for Other;
``delivery.campaigns.pricing`` prices a message by the longest prefix.

Loading replaces the whole card in one transaction. A file that is not a rate card fails
with the line and column at fault and nothing changes: no "Market" header, an unknown market,
a price that is not a number, a market twice, several currencies. An empty cell, "-",
"n/a" or "Free" is no rate for that category. Authentication-international rates are
read and counted but not stored: they apply only to businesses Meta has made eligible, and
the template's own category (authentication) is what this version prices.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

import openpyxl
import phonenumbers
from django.core.exceptions import ValidationError
from django.db import transaction
from phonenumbers.phonemetadata import PhoneMetadata

from campaigns.models import PricingCategory, RateCard

OTHER = "*"
# A sample of Meta's USD card in its own layout (its source in fixtures/SOURCE.md): the demo
# loads it, the tests read it.
SAMPLE_RATE_CARD = Path(__file__).parent / "fixtures" / "meta-rate-card-usd-sample.csv"

# Columns of Meta's file (after ``_key``) -> the pricing category stored.
CATEGORY_COLUMNS = {
    "marketing": PricingCategory.MARKETING,
    "utility": PricingCategory.UTILITY,
    "authentication": PricingCategory.AUTHENTICATION,
    "service": PricingCategory.SERVICE,
}
AUTH_INTERNATIONAL = "authenticationinternational"
NO_RATE = {"", "-", "–", "n/a", "na", "free", "none"}

# Meta's markets -> ISO regions, as on Meta's "market to country/region" table. The named
# markets first: a country named on its own row is priced there, never with its group.
COUNTRY_MARKETS: dict[str, tuple[str, ...]] = {
    "Argentina": ("AR",),
    "Bangladesh": ("BD",),
    "Brazil": ("BR",),
    "Chile": ("CL",),
    "Colombia": ("CO",),
    "Egypt": ("EG",),
    "France": ("FR",),
    "Germany": ("DE",),
    "India": ("IN",),
    "Indonesia": ("ID",),
    "Iraq": ("IQ",),
    "Israel": ("IL",),
    "Italy": ("IT",),
    "Kazakhstan": ("KZ",),
    "Kuwait": ("KW",),
    "Malaysia": ("MY",),
    "Mexico": ("MX",),
    "Morocco": ("MA",),
    "Nepal": ("NP",),
    "Netherlands": ("NL",),
    "Nigeria": ("NG",),
    "Oman": ("OM",),
    "Pakistan": ("PK",),
    "Peru": ("PE",),
    "Russia": ("RU",),
    "Saudi Arabia": ("SA",),
    "South Africa": ("ZA",),
    "Spain": ("ES",),
    "Sri Lanka": ("LK",),
    "Turkey": ("TR",),
    "Ukraine": ("UA",),
    "United Arab Emirates": ("AE",),
    "United Kingdom": ("GB",),
    "North America": ("US", "CA"),
}
GROUP_MARKETS: dict[str, tuple[str, ...]] = {
    "Rest of Africa": (
        *("DZ", "AO", "BJ", "BW", "BF", "BI", "CM", "TD", "CG", "CI", "ER", "ET", "GA"),
        *("GM", "GH", "GW", "KE", "LS", "LR", "LY", "MG", "MW", "ML", "MR", "MA", "MZ"),
        *("NA", "NE", "RW", "SN", "SL", "SO", "SS", "SD", "SZ", "TZ", "TG", "TN", "UG"),
        "ZM",
    ),
    "Rest of Asia Pacific": (
        *("AF", "AU", "BD", "KH", "CN", "HK", "JP", "LA", "MO", "MN", "NP", "NZ", "PG"),
        *("PH", "SG", "LK", "TW", "TJ", "TH", "TM", "UZ", "VN"),
    ),
    "Rest of Central & Eastern Europe": (
        *("AL", "AM", "AZ", "BY", "BG", "HR", "CZ", "GE", "GR", "HU", "LV", "LT", "MD"),
        *("MK", "PL", "RO", "RS", "SK", "SI", "UA"),
    ),
    "Rest of Latin America": (
        *("BO", "CR", "DO", "EC", "SV", "GT", "HT", "HN", "JM", "NI", "PA", "PY", "PR"),
        *("UY", "VE"),
    ),
    "Rest of Middle East": ("BH", "IQ", "JO", "KW", "LB", "OM", "QA", "YE"),
    "Rest of Western Europe": ("AT", "BE", "DK", "FI", "IE", "NO", "PT", "SE", "CH"),
}
ALIASES = {
    "turkiye": "Turkey",
    "uae": "United Arab Emirates",
    "uk": "United Kingdom",
    "unitedstates": "North America",
    "restofcentraleasterneurope": "Rest of Central & Eastern Europe",
    "restofcentralandeasterneurope": "Rest of Central & Eastern Europe",
    "restoftheworld": "Other",
    "other": "Other",
}
_MARKETS = {**COUNTRY_MARKETS, **GROUP_MARKETS, "Other": ()}
# A cell with a currency sign or code around the number: "$0.0625", "0.0625 USD".
_PRICE_RE = re.compile(r"^[^\d\-.,]*(-?[\d.,\s]+?)\s*[A-Za-z$€£₹]*$")
_HEADER_SEARCH_ROWS = 30


def _key(text: str) -> str:
    """ "Authentication - International" -> "authenticationinternational"."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed.lower() if ch.isalnum() and ch.isascii())


_MARKET_KEYS = {_key(name): name for name in _MARKETS} | ALIASES


def market_name(text: str) -> str | None:
    """The market a file's cell names ("Türkiye" -> "Turkey"), or None."""
    return _MARKET_KEYS.get(_key(text))


def region_prefixes(region: str) -> list[str]:
    """The calling-code prefixes of an ISO region: "+55" for BR; for a region sharing its
    code with others (+1, +7, +44...), the code and the region's own leading digits
    ("+1876" for JM, "+776"/"+777" for KZ); the code alone for the code's main region."""
    code = phonenumbers.country_code_for_region(region)
    if not code:
        return []
    regions = phonenumbers.COUNTRY_CODE_TO_REGION_CODE.get(code, ())
    if len(regions) <= 1 or regions[0] == region:
        return [f"+{code}"]
    metadata = PhoneMetadata.metadata_for_region(region)
    leading = metadata.leading_digits if metadata is not None else None
    expanded = _digit_alternatives(leading or "")
    # No plain prefix tells it apart (or none at all): priced with the code's main region.
    return [f"+{code}{digits}" for digits in expanded if len(f"+{code}{digits}") <= 8]


def _digit_alternatives(pattern: str) -> list[str]:
    """ "658|876" -> ["658", "876"]; "8[024]9" -> ["809", "829", "849"]; [] for anything
    but digits and digit classes."""
    found: list[str] = []
    for alternative in pattern.split("|") if pattern else ():
        prefixes = [""]
        for part in re.findall(r"\[[^\]]*\]|.", alternative):
            if part.isdigit():
                prefixes = [p + part for p in prefixes]
            elif re.fullmatch(r"\[(\d|\d-\d)+\]", part):
                digits = [
                    str(d)
                    for lo, hi in re.findall(r"(\d)(?:-(\d))?", part[1:-1])
                    for d in range(int(lo), int(hi or lo) + 1)
                ]
                prefixes = [p + d for p in prefixes for d in digits]
            else:
                return []
        found.extend(prefixes)
    return found


@dataclass
class RateCardFile:
    """What a rate-card file holds: rates by market and category, in one currency."""

    currency: str
    rates: dict[str, dict[str, Decimal]] = field(default_factory=dict)
    authentication_international: int = 0  # rates read and not stored


@dataclass(frozen=True)
class RateCardLoad:
    markets: int
    rates: int
    prefixes: int
    currency: str
    authentication_international: int

    def text(self) -> str:
        extra = (
            f"; {self.authentication_international} authentication-international rates "
            "read and not used"
            if self.authentication_international
            else ""
        )
        return (
            f"Loaded {self.rates:,} rates for {self.markets} markets "
            f"({self.prefixes:,} calling-code prefixes) in {self.currency}{extra}."
        )


def rate_card_read(path: str | Path, *, currency: str = "") -> RateCardFile:
    """Read Meta's rate-card file (CSV or XLSX); ``ValidationError`` says what is wrong
    and where. ``currency`` is used when the file has no Currency column."""
    rows = list(_rows(Path(path)))
    header_at = next(
        (i for i, row in enumerate(rows[:_HEADER_SEARCH_ROWS]) if "market" in map(_key, row)),
        None,
    )
    if header_at is None:
        raise ValidationError(
            "not a rate card: no header row with a 'Market' column in its first "
            f"{_HEADER_SEARCH_ROWS} lines (Meta's file has Market, Currency, Marketing, "
            "Utility, Authentication, Service)"
        )
    header = [_key(cell) for cell in rows[header_at]]
    categories = {i: CATEGORY_COLUMNS[h] for i, h in enumerate(header) if h in CATEGORY_COLUMNS}
    if not categories:
        raise ValidationError(
            f"line {header_at + 1}: no Marketing, Utility, Authentication or Service column"
        )
    market_at = header.index("market")
    currency_at = header.index("currency") if "currency" in header else None
    if currency_at is None and not currency:
        raise ValidationError("the file has no Currency column: give the currency (--currency)")
    auth_international_at = (
        header.index(AUTH_INTERNATIONAL) if AUTH_INTERNATIONAL in header else None
    )
    card = RateCardFile(currency=currency.upper())
    currencies: set[str] = set()
    for number, row in enumerate(rows[header_at + 1 :], start=header_at + 2):
        cells = [*row, *[""] * (len(header) - len(row))]
        if not any(c.strip() for c in cells):
            continue
        market = market_name(cells[market_at])
        if market is None:
            if not cells[market_at].strip():
                continue  # a note under the table
            raise ValidationError(
                f"line {number}: unknown market {cells[market_at].strip()!r}; a market is a "
                "country Meta prices on its own, a 'Rest of ...' group, North America or Other"
            )
        if market in card.rates:
            raise ValidationError(f"line {number}: {market} is on the card twice")
        if currency_at is not None and cells[currency_at].strip():
            currencies.add(_currency(cells[currency_at], number))
        card.rates[market] = {
            category: price
            for at, category in categories.items()
            if (price := _price(cells[at], number, rows[header_at][at])) is not None
        }
        if auth_international_at is not None and (
            _price(cells[auth_international_at], number, rows[header_at][auth_international_at])
            is not None
        ):
            card.authentication_international += 1
    if not card.rates:
        raise ValidationError("the rate card has a header but no market below it")
    if len(currencies) > 1:
        raise ValidationError(
            f"the file mixes currencies ({', '.join(sorted(currencies))}): load one card, "
            "in the currency Meta bills you in"
        )
    card.currency = next(iter(currencies), card.currency)
    if not re.fullmatch(r"[A-Z]{3}", card.currency):
        raise ValidationError(f"{card.currency!r} is not a currency code such as USD")
    return card


def market_prefixes(markets: Iterable[str]) -> dict[str, str]:
    """{calling-code prefix: market} for the markets a card names: a country's own row
    first, then the groups for their countries no row names, "*" for Other."""
    prefixes: dict[str, str] = {}
    named = set(markets)
    for market in [m for m in named if m in COUNTRY_MARKETS]:
        for region in COUNTRY_MARKETS[market]:
            for prefix in region_prefixes(region):
                prefixes.setdefault(prefix, market)
    countries_named = {r for m in named if m in COUNTRY_MARKETS for r in COUNTRY_MARKETS[m]}
    for market in sorted(m for m in named if m in GROUP_MARKETS):
        for region in GROUP_MARKETS[market]:
            if region in countries_named:
                continue
            for prefix in region_prefixes(region):
                prefixes.setdefault(prefix, market)
    if "Other" in named:
        prefixes[OTHER] = "Other"
    return prefixes


def rate_card_load(path: str | Path, *, currency: str = "") -> RateCardLoad:
    """Replace the rate card with the rates of Meta's file at ``path`` (all or nothing)."""
    card = rate_card_read(path, currency=currency)
    prefixes = market_prefixes(card.rates)
    rows = [
        RateCard(
            country_prefix=prefix,
            category=category,
            price=price,
            currency=card.currency,
        )
        for prefix, market in sorted(prefixes.items())
        for category, price in card.rates[market].items()
    ]
    with transaction.atomic():
        RateCard.objects.all().delete()
        RateCard.objects.bulk_create(rows)
    return RateCardLoad(
        markets=len(card.rates),
        rates=len(rows),
        prefixes=len(prefixes),
        currency=card.currency,
        authentication_international=card.authentication_international,
    )


def _rows(path: Path) -> Iterator[list[str]]:
    try:
        head = path.read_bytes()[:4]
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror}") from exc
    if head.startswith(b"PK\x03\x04"):
        yield from _xlsx_rows(path)
        return
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("cp1252", errors="replace")
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
        delimiter = dialect.delimiter
    except csv.Error:
        delimiter = ","
    try:
        yield from csv.reader(io.StringIO(text), delimiter=delimiter)
    except csv.Error as exc:
        raise ValidationError(f"malformed CSV: {exc}") from exc


def _xlsx_rows(path: Path) -> Iterator[list[str]]:
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds for a broken file
        raise ValidationError(f"cannot read {path.name} as XLSX: {exc}") from exc
    try:
        for values in book.worksheets[0].iter_rows(values_only=True):
            yield ["" if v is None else str(v) for v in values]
    finally:
        book.close()


def _price(cell: str, line: int, column: str) -> Decimal | None:
    text = cell.strip()
    if text.lower() in NO_RATE:
        return None
    match = _PRICE_RE.match(text)
    number = match.group(1).replace(" ", "") if match else ""
    if "," in number and "." not in number:
        number = number.replace(",", ".")  # a decimal comma
    number = number.replace(",", "")  # thousands separators
    try:
        price = Decimal(number)
    except InvalidOperation:
        raise ValidationError(
            f"line {line}, column {column.strip()!r}: {cell.strip()!r} is not a price"
        ) from None
    price = price.normalize() if price else Decimal(0)
    if price < 0:
        raise ValidationError(f"line {line}, column {column.strip()!r}: a negative price")
    if price.as_tuple().exponent < -5 or price >= 100_000:  # type: ignore[operator]
        raise ValidationError(
            f"line {line}, column {column.strip()!r}: {cell.strip()!r} has more than five "
            "decimals or is too large for a per-message rate"
        )
    return price


def _currency(cell: str, line: int) -> str:
    code = cell.strip().upper()
    if not re.fullmatch(r"[A-Z]{3}", code):
        raise ValidationError(f"line {line}: {cell.strip()!r} is not a currency code such as USD")
    return code
