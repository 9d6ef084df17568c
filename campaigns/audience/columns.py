"""Which column of a contact file holds the phone, the name and the attributes."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from campaigns.audience.rejects import rejects_own_columns
from campaigns.audience.rows import ImportFileError

# Header spellings (lower-cased, accents and punctuation removed) in order of preference:
# a file with both "whatsapp" and "phone" columns is most likely meant for the first.
PHONE_HEADERS = (
    "whatsapp",
    "whatsappnumber",
    "whatsappphone",
    "wanumber",
    "mobile",
    "mobilephone",
    "mobilenumber",
    "cell",
    "cellphone",
    "celular",
    "movil",
    "portable",
    "handy",
    "msisdn",
    "phone",
    "phonenumber",
    "phoneno",
    "telephone",
    "telefone",
    "telefono",
    "tel",
    "fone",
    "number",
    "numero",
    "contact",
)
NAME_HEADERS = (
    "name",
    "fullname",
    "contactname",
    "nome",
    "nombre",
    "nom",
    "firstname",
    "givenname",
    "primeironome",
)

_PHONE_LIKE_RE = re.compile(r"^\+?[0-9 ()./-]{6,}$")


def header_key(text: str) -> str:
    """ "Téléphone " → "telephone", "Phone Number" → "phonenumber": for matching only."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed.lower() if ch.isalnum() and ch.isascii())


@dataclass
class Columns:
    """Which cell holds what, decided from the header (or from the first row)."""

    phone: int
    name: int | None
    attributes: list[tuple[int, str]]
    has_header: bool
    headers: list[str] = field(default_factory=list)

    @property
    def phone_header(self) -> str:
        return self.headers[self.phone] if self.has_header else f"column {self.phone + 1}"


def columns_detect(
    first_row: list[str], *, phone_column: str | None = None, name_column: str | None = None
) -> Columns:
    """Pick the phone, name and attribute columns from the first row of the file.

    The first row is a header unless no phone column is named or recognised and one of its
    cells looks like a phone number: then the file has no header and that cell's column is
    the phone column (a bare list of numbers, one per line, imports as it is).
    """
    headers = _unique_headers(first_row)
    keys = [header_key(h) for h in headers]
    phone = _find_column(headers, keys, phone_column, PHONE_HEADERS, "phone")
    has_header = True
    if phone is None:
        looks_like_phone = [i for i, cell in enumerate(first_row) if _PHONE_LIKE_RE.match(cell)]
        if looks_like_phone:
            phone, has_header = looks_like_phone[0], False
        elif len([h for h in first_row if h.strip()]) == 1:
            phone = next(i for i, h in enumerate(first_row) if h.strip())
        else:
            raise ImportFileError(
                "no phone column found among "
                f"{', '.join(repr(h) for h in headers)}; name it with --phone-column"
            )
    if not has_header:
        headers = [f"column_{i + 1}" for i in range(len(first_row))]
        name = _find_column(headers, headers, name_column, (), "name") if name_column else None
    else:
        name = _find_column(headers, keys, name_column, NAME_HEADERS, "name")
    # A rejects file uploaded again: its line, value, reason... columns are its own.
    own = rejects_own_columns(headers) if has_header else 0
    attributes = [(i, h) for i, h in enumerate(headers) if i not in (phone, name) and i >= own]
    return Columns(phone, name, attributes, has_header, headers)


def _unique_headers(row: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    headers = []
    for i, cell in enumerate(row):
        header = cell.strip() or f"column_{i + 1}"
        count = seen.get(header, 0)
        seen[header] = count + 1
        headers.append(header if count == 0 else f"{header}_{count + 1}")
    return headers


def _find_column(
    headers: list[str],
    keys: list[str],
    given: str | None,
    aliases: tuple[str, ...],
    what: str,
) -> int | None:
    if given:
        for candidates in (headers, keys):
            wanted = given.strip() if candidates is headers else header_key(given)
            if wanted in candidates:
                return candidates.index(wanted)
        raise ImportFileError(
            f"{what} column {given!r} not found among {', '.join(repr(h) for h in headers)}"
        )
    for alias in aliases:
        if alias in keys:
            return keys.index(alias)
    return None
