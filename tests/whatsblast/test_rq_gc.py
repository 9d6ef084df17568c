"""A campaign worker freezes what start-up built, so full collections skip it."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from whatsblast.rq import start_up_objects_freeze


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_objects_alive_at_start_up_are_frozen_and_later_garbage_is_still_collected(
    unfrozen: None,
) -> None:
    assert gc.get_freeze_count() == 0
    kept = _Node()  # alive at "start-up"
    start_up_objects_freeze()
    assert gc.get_freeze_count() > 1000  # the modules and everything loaded so far
    assert not any(obj is kept for obj in gc.get_objects())  # out of every generation

    # A cycle made afterwards is not frozen: a collection still frees it.
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None
