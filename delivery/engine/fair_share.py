"""Fair shares of one number among the campaigns sending from it: stride scheduling.

Each campaign carries a *pass*; the next send goes to the campaign with the lowest pass
among those with a row ready, whose pass then grows by ``1 / weight``. Over any stretch in
which campaigns stay busy, each gets sends in proportion to its weight; a campaign with
nothing ready takes nothing and leaves its share to the others (work-conserving). A
campaign that joins (or comes back after a lull) starts at the lowest pass of the busy
ones: it gets its share at once, never a catch-up burst for the time it was away.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class Share:
    key: int
    weight: float
    pass_value: float = 0.0


class StrideScheduler:
    def __init__(self) -> None:
        self._shares: dict[int, Share] = {}

    def __contains__(self, key: int) -> bool:
        return key in self._shares

    def join(self, key: int, weight: float) -> None:
        """Add (or re-weigh) a campaign; a newcomer starts level with the busy ones."""
        weight = max(weight, 1e-6)
        share = self._shares.get(key)
        if share is not None:
            share.weight = weight
            return
        start = min((s.pass_value for s in self._shares.values()), default=0.0)
        self._shares[key] = Share(key, weight, start)

    def leave(self, key: int) -> None:
        self._shares.pop(key, None)

    def pick(self, ready: Iterable[int]) -> int | None:
        """The campaign to send next among ``ready`` ones; its pass advances."""
        keys = set(ready)
        candidates = [s for k, s in self._shares.items() if k in keys]
        if not candidates:
            return None
        # A campaign with nothing ready banks no credit: it would come back far behind and
        # take every send until it caught up. It stays level with the lowest busy pass.
        floor = min(s.pass_value for s in candidates)
        for share in self._shares.values():
            if share.key not in keys and share.pass_value < floor:
                share.pass_value = floor
        chosen = min(candidates, key=lambda s: (s.pass_value, s.key))
        chosen.pass_value += 1.0 / chosen.weight
        return chosen.key
