"""List pages whose cost does not grow with the table.

Tables that grow to millions of rows (contacts, messages) count at most ``COUNT_CAP`` rows
per list page and never list what a delete would cascade to.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.paginator import Paginator
from django.utils.functional import cached_property

# Above this many matching rows a list page says "COUNT_CAP" instead of counting them all:
# an exact count(*) over ten million rows takes seconds on every page load.
COUNT_CAP = 10_000


class CappedCountPaginator(Paginator[Any]):
    """Counts at most ``COUNT_CAP`` rows; pages beyond it are reached by filtering."""

    @cached_property
    def count(self) -> int:
        return int(self.object_list[:COUNT_CAP].count())  # type: ignore[attr-defined]


class LargeTableAdmin(admin.ModelAdmin[Any]):
    """List pages whose cost does not grow with the table."""

    paginator = CappedCountPaginator
    show_full_result_count = False
    list_per_page = 50
