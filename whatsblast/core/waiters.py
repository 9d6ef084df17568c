"""Waking the callers of a group commit.

The webhook ingest and the click store both gather requests from many threads and event
loops into one statement. A caller on a thread waits on a ``threading.Event``; a caller on an
event loop (the ASGI web process) on an ``asyncio.Future`` that must be resolved on its own
loop. ``waiters_release`` wakes them all once the statement has committed, scheduling one
callback per loop rather than one per request.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Protocol


class Waiter(Protocol):
    """A request waiting for its batch: it has one of the two."""

    done: threading.Event | None
    future: asyncio.Future[None] | None


def waiters_release(batch: Iterable[Waiter]) -> None:
    """Wake every caller of the batch: threads by their event, each event loop once."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for item in batch:
        if item.done is not None:
            item.done.set()
        if item.future is not None:
            by_loop.setdefault(item.future.get_loop(), []).append(item.future)
    for loop, futures in by_loop.items():
        try:
            loop.call_soon_threadsafe(_futures_resolve, futures)
        except RuntimeError:  # the loop closed (its process is stopping): nobody waits
            pass


def _futures_resolve(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        if not future.done():  # a caller that timed out cancelled its future
            future.set_result(None)
