"""Every environment variable the code reads is documented in .env.example."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READER = re.compile(r'env_(?:str|int|float|bool|list|url|optional)\(\s*"([A-Z0-9_]+)"')


def test_env_example_lists_every_variable_read() -> None:
    read: set[str] = set()
    for package in ("whatsblast", "campaigns", "delivery", "webhooks"):
        for path in (ROOT / package).rglob("*.py"):
            read.update(READER.findall(path.read_text()))
    documented = set(re.findall(r"^#?\s*([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    assert read, "no environment readers found"
    assert sorted(read - documented) == []
