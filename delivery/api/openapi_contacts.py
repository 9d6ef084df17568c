"""The OpenAPI document's part for contacts, lists, segments and templates."""

from __future__ import annotations

from typing import Any

PATHS: dict[str, Any] = {}
SCHEMAS: dict[str, Any] = {}
# Error codes these endpoints answer beyond the shared ones.
ERROR_CODES: list[str] = []
