"""Erasing a contact: personal data removed, message history kept anonymised."""

from __future__ import annotations
