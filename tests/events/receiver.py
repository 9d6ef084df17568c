"""A local receiver for events: records every POST (headers, raw body) and answers as told:
``ok`` (204), ``error`` (500), or ``down`` (the socket closed: connection refused)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from delivery.events.signing import SIGNATURE_HEADER, signature_verify


@dataclass
class Received:
    body: bytes
    signature: str

    @property
    def events(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = json.loads(self.body)["events"]
        return events


@dataclass
class Receiver:
    port: int = 0
    mode: str = "ok"
    received: list[Received] = field(default_factory=list)
    refused_posts: int = 0
    # When set, a POST signals ``entered`` and waits for ``hold`` before it is answered.
    hold: threading.Event | None = None
    entered: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver.hold is not None:
                    receiver.entered.set()
                    receiver.hold.wait(10)
                if receiver.mode == "error":
                    with receiver._lock:
                        receiver.refused_posts += 1
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b"receiver failing")
                    return
                with receiver._lock:
                    receiver.received.append(Received(body, self.headers.get(SIGNATURE_HEADER, "")))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Close the socket: further POSTs get connection refused."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return [event for post in self.received for event in post.events]

    def all_signed(self, secret: str) -> bool:
        with self._lock:
            return all(
                signature_verify(secret=secret, header=post.signature, body=post.body)
                for post in self.received
            )
