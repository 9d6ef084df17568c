"""List pages whose cost does not grow with the table.

Tables that grow to millions of rows (contacts, messages) count at most ``COUNT_CAP`` rows
per list page and never list what a delete would cascade to.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
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


class CappedChangeList(ChangeList):
    """Says "More than 10,000 messages" when the count stopped at the cap, never a number
    that looks exact."""

    def get_results(self, request: Any) -> None:
        super().get_results(request)
        self.count_capped = self.result_count >= COUNT_CAP
        plural = self.opts.verbose_name_plural
        if self.count_capped:
            self.count_text = f"More than {COUNT_CAP:,} {plural}"
        else:
            noun = self.opts.verbose_name if self.result_count == 1 else plural
            self.count_text = f"{self.result_count:,} {noun}"


class LargeTableAdmin(admin.ModelAdmin[Any]):
    """List pages whose cost does not grow with the table."""

    paginator = CappedCountPaginator
    show_full_result_count = False
    list_per_page = 50

    def get_changelist(self, request: Any, **kwargs: Any) -> type[ChangeList]:
        return CappedChangeList
