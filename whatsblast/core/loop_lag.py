"""How late an event loop runs what becomes ready: the ASGI web process's measure of overload.

gunicorn's ``asgi`` worker serves every connection of a process from one event loop. Past the
process's CPU capacity nothing queues visibly: each turn of the loop simply takes longer, and
every request waits that much more before its handler runs. A probe that asks to wake every
``interval_s`` and records how much later it woke measures exactly that wait; the webhook
handler answers 503 at once while it is above ``WEBHOOK_QUEUE_LIMIT_S`` (as the threaded
worker does for a request that waited too long for a thread).
"""

from __future__ import annotations

import asyncio
import time


class LoopLag:
    """The lag of the loop this probe runs on, refreshed every ``interval_s``."""

    def __init__(self, interval_s: float = 0.02) -> None:
        self.interval_s = interval_s
        self.lag_s = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start probing the running loop (once; later calls do nothing)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._probe())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _probe(self) -> None:
        while True:
            asked = time.monotonic()
            await asyncio.sleep(self.interval_s)
            self.lag_s = max(0.0, time.monotonic() - asked - self.interval_s)
