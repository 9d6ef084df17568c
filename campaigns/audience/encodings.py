"""How a contact file is written: its text encoding and its CSV delimiter.

The encoding is decided once per file, before any row is read:

1. a UTF-16 byte-order mark → UTF-16;
2. the whole file decodes as UTF-8 → UTF-8 (a leading BOM, as Excel writes, is dropped);
3. otherwise → Windows-1252, which is what Excel on Windows writes for "CSV" and a superset
   of Latin-1's printable range;
4. a file with NUL bytes, or with bytes Windows-1252 leaves undefined, is refused with a
   message asking for "CSV UTF-8". Reading it as Latin-1 would "work" and store garbage.

The check scans the file once in 1 MiB chunks (a 60 MB file costs well under a second), so
an encoding error never surfaces half-way through an import.
"""

from __future__ import annotations

import codecs
import io
from pathlib import Path

from campaigns.audience.rows import ImportFileError

CSV_DELIMITERS = (",", ";", "\t")
SNIFF_BYTES = 64 * 1024
_SCAN_CHUNK = 1 << 20


def sniff_delimiter(sample: str) -> tuple[str, bool]:
    """The delimiter of the header line, and whether line 1 is Excel's ``sep=`` hint.

    Counts ``,`` ``;`` and tab outside quotes in the first non-empty line; the most frequent
    wins, ``,`` on ties or when none appears (a one-column file).
    """
    lines = sample.lstrip("\ufeff").splitlines()
    if lines and lines[0].lower().startswith("sep=") and len(lines[0]) == 5:
        return lines[0][4], True
    header = next((line for line in lines if line.strip()), "")
    counts = dict.fromkeys(CSV_DELIMITERS, 0)
    quoted = False
    for ch in header:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in counts:
            counts[ch] += 1
    best = max(CSV_DELIMITERS, key=lambda d: counts[d])
    return (best if counts[best] else ","), False


def detect_encoding(path: Path) -> str:
    """See the module docstring: UTF-16 by BOM, else UTF-8, else Windows-1252, else refuse."""
    with path.open("rb") as f:
        head = f.read(4)
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return "utf-16"
        for encoding in ("utf-8-sig", "cp1252"):
            f.seek(0)
            if _decodes(f, encoding):
                return encoding
    raise ImportFileError(
        "the file is not text in UTF-8 or Windows-1252 (binary data or an unknown encoding); "
        'save it as "CSV UTF-8" or name the encoding with --encoding'
    )


def _decodes(f: io.BufferedReader, encoding: str) -> bool:
    decoder = codecs.getincrementaldecoder(encoding)()
    try:
        while chunk := f.read(_SCAN_CHUNK):
            if b"\x00" in chunk:
                return False
            decoder.decode(chunk)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True
