"""Reading ahead of the database: parse a file in a thread while batches are written."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_DONE = object()


class ReadAhead(Generic[T]):
    """Iterate ``items`` in a background thread, at most ``depth`` items ahead.

    Parsing a file is CPU-bound Python; writing a batch is mostly waiting on PostgreSQL,
    which releases the GIL. Running the two side by side takes the database time off the
    import's wall time while ``depth`` bounds the memory held in between. An exception in
    the producer is raised in the consumer. Use as a context manager: leaving it stops and
    joins the producer, so the file it reads can be closed safely afterwards.
    """

    def __init__(self, items: Iterable[T], *, depth: int = 2) -> None:
        self._queue: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._produce, args=(items,), name="import-read-ahead", daemon=True
        )
        self._thread.start()

    def __enter__(self) -> ReadAhead[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _produce(self, items: Iterable[T]) -> None:
        try:
            for item in items:
                if not self._put(item):
                    return
        except BaseException as exc:  # handed to the consumer, which re-raises it
            self._put(_Failure(exc))
            return
        self._put(_DONE)

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[T]:
        while True:
            item = self._queue.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield cast(T, item)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
