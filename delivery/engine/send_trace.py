"""An opt-in record of the moment each campaign send was granted, to compare with Meta's.

The send log bounds the grants of any 1.02 s to the number's rate at the moment of the
write; Meta (or the simulator) counts sends when it reads them, after the network and its
own scheduling. When a receiver's second holds more than the rate, this record says which
side it came from: the grants, or the way to the receiver.

With ``SEND_TRACE_DIR`` set (``WHATSBLAST_SEND_TRACE_DIR``), each process appends one line
per grant to ``<dir>/grants-<pid>.txt``: message id, phone number id, wall-clock seconds.
Lines are buffered and written by the send service's housekeeping, a few times a second,
off the dispatch path; a process killed loses at most its last buffer. Without the setting
nothing is recorded and the sender's cost is one attribute test per send.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from django.conf import settings

# Lines kept before a write is due even without housekeeping (a sender running in place).
BUFFER_LINES = 2000


class SendTrace:
    """One process's grant record, appended to its own file."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"grants-{os.getpid()}.txt"
        self._lines: list[str] = []
        self._lock = threading.Lock()

    def granted(self, message_id: int, phone_number_id: str) -> None:
        with self._lock:
            self._lines.append(f"{message_id} {phone_number_id} {time.time():.6f}\n")
            full = len(self._lines) >= BUFFER_LINES
        if full:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            lines, self._lines = self._lines, []
            if lines:
                with self.path.open("a") as out:
                    out.writelines(lines)


_trace: SendTrace | None = None
_trace_pid = 0


def send_trace() -> SendTrace | None:
    """This process's trace, or ``None`` when ``SEND_TRACE_DIR`` is not set."""
    global _trace, _trace_pid
    if not settings.SEND_TRACE_DIR:
        return None
    if _trace is None or _trace_pid != os.getpid():  # a forked child writes its own file
        _trace = SendTrace(Path(settings.SEND_TRACE_DIR))
        _trace_pid = os.getpid()
    return _trace


def grants_read(directory: Path) -> dict[int, tuple[str, float]]:
    """Every grant recorded under ``directory``: message id -> (phone number id, time)."""
    grants: dict[int, tuple[str, float]] = {}
    for path in sorted(directory.glob("grants-*.txt")):
        for line in path.read_text().splitlines():
            message_id, phone_number_id, at = line.split()
            grants[int(message_id)] = (phone_number_id, float(at))
    return grants
